-- Documents as files (issue 43): a documents row names its bytes in the object store.
--
-- A pasted text keeps its content in the row, as before. An uploaded file or a
-- client's object reference keeps only where the bytes are and which immutable
-- version of them was accepted; the bytes themselves never enter PostgreSQL:
--   uri          fenceline-store://<sha256> (the embedded folder) or s3://bucket/key
--   version      the store's version of the object (the folder: the SHA-256; S3: the
--                version id, or the quoted ETag of an unversioned bucket)
--   page_count   a PDF's pages, counted at intake; NULL for other media types
-- The columns that were there already keep their meaning for both kinds: sha256 (the
-- digest every read is checked against), content_type (for a file, the media type
-- sniffed from its bytes, never the client's header), byte_size (the file's size)
-- and object_version (the content address, sha256:<hex>, that request hashes use).
-- A row holds its content or a reference, never both and never neither.

ALTER TABLE documents
  ADD COLUMN uri text,
  ADD COLUMN version text,
  ADD COLUMN page_count integer CHECK (page_count IS NULL OR page_count > 0),
  ALTER COLUMN content DROP NOT NULL,
  ADD CONSTRAINT documents_content_or_reference CHECK (
    (content IS NOT NULL AND uri IS NULL AND version IS NULL)
    OR (content IS NULL AND uri IS NOT NULL AND version IS NOT NULL)
  );

-- job_accept and intake_accept of migration 018, with the reference as three more
-- parameters at the end (NULL for a pasted text). The bodies are otherwise unchanged.
DROP FUNCTION intake_accept(integer, text, uuid, boolean, numeric, uuid, uuid, uuid, text, text,
                            text, integer, text, text, uuid, text, text, integer, text, text,
                            integer, integer, integer, double precision, timestamptz, uuid,
                            jsonb, text);
DROP FUNCTION job_accept(uuid, uuid, text, text, text, integer, text, text, uuid, text, text,
                         integer, text, text, integer, integer, integer, double precision,
                         timestamptz, uuid, jsonb, text);

-- The document upsert, the job insert and, only when the job row is new, its
-- outbox event; job_id NULL when the key already names a job.
CREATE FUNCTION job_accept(p_document uuid, p_tenant uuid, p_sha256 text, p_version text,
                           p_content text, p_bytes integer, p_content_type text,
                           p_filename text, p_job uuid, p_key text, p_request_hash text,
                           p_schema_version integer, p_model_policy text, p_traceparent text,
                           p_priority integer, p_tokens integer, p_max_attempts integer,
                           p_deadline_seconds double precision, p_now timestamptz,
                           p_event uuid, p_payload jsonb, p_event_type text,
                           p_uri text, p_store_version text, p_page_count integer)
RETURNS TABLE (document_id uuid, job_id uuid, accepted_state text,
               accepted_state_version bigint, created_at timestamptz, deadline_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH doc AS (
    INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size,
                           content_type, filename, uri, version, page_count)
    VALUES (p_document, p_tenant, p_sha256, p_version, p_content, p_bytes, p_content_type,
            p_filename, p_uri, p_store_version, p_page_count)
    ON CONFLICT (tenant_id, sha256) DO UPDATE SET sha256 = EXCLUDED.sha256
    RETURNING id, object_version
  ),
  job AS (
    INSERT INTO extraction_jobs
      (id, tenant_id, idempotency_key, request_hash, document_id, object_version,
       schema_version, model_policy, priority, estimated_tokens, max_attempts, state,
       deadline_at, available_at, created_at, traceparent)
    SELECT p_job, p_tenant, p_key, p_request_hash, doc.id, doc.object_version,
           p_schema_version, p_model_policy, p_priority, p_tokens, p_max_attempts, 'READY',
           coalesce(p_now, now()) + make_interval(secs => p_deadline_seconds),
           coalesce(p_now, now()), coalesce(p_now, now()), p_traceparent
    FROM doc
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING id, state, state_version, created_at, deadline_at, traceparent
  ),
  event AS (
    INSERT INTO outbox_events (event_id, job_id, event_type, payload, traceparent)
    SELECT p_event, job.id, p_event_type, p_payload, job.traceparent FROM job
  )
  SELECT doc.id, job.id, job.state, job.state_version, job.created_at, job.deadline_at
  FROM doc LEFT JOIN job ON true;
END
$$;

-- The whole acceptance (migration 018's comment holds): lock, read, decide, write.
CREATE FUNCTION intake_accept(p_lock_namespace integer, p_period text,
                              p_api_key uuid, p_capacity_refused boolean,
                              p_cost numeric, p_reservation uuid,
                              p_document uuid, p_tenant uuid, p_sha256 text, p_version text,
                              p_content text, p_bytes integer, p_content_type text,
                              p_filename text, p_job uuid, p_key text, p_request_hash text,
                              p_schema_version integer, p_model_policy text,
                              p_traceparent text, p_priority integer, p_tokens integer,
                              p_max_attempts integer, p_deadline_seconds double precision,
                              p_now timestamptz, p_event uuid, p_payload jsonb,
                              p_event_type text, p_uri text, p_store_version text,
                              p_page_count integer)
RETURNS TABLE (outcome text, max_pending_jobs integer, max_pending_bytes bigint,
               max_pending_tokens bigint, spend_budget numeric,
               jobs bigint, bytes bigint, tokens bigint, spent numeric,
               seconds_to_next_period numeric,
               job_id uuid, request_hash text, deadline_at timestamptz, document_id uuid,
               accepted_state text, accepted_state_version bigint, key_state text)
LANGUAGE plpgsql AS $$
DECLARE
  a record;
  j record;
  decided text;
BEGIN
  PERFORM pg_advisory_xact_lock(p_lock_namespace, hashtext(p_tenant::text));
  SELECT * INTO a FROM tenant_admission(p_tenant, p_period, p_now, p_key, p_api_key);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tenant % does not exist', p_tenant USING ERRCODE = 'foreign_key_violation';
  END IF;
  decided := CASE
    WHEN a.key_state IS NOT NULL AND a.key_state <> 'active' THEN 'key_inactive'
    WHEN a.job_id IS NOT NULL THEN 'known_key'
    WHEN p_capacity_refused THEN 'capacity'
    WHEN a.jobs + 1 > a.max_pending_jobs THEN 'quota_pending_jobs'
    WHEN a.bytes + p_bytes > a.max_pending_bytes THEN 'quota_pending_bytes'
    WHEN a.tokens + p_tokens > a.max_pending_tokens THEN 'quota_pending_tokens'
    WHEN a.spent + p_cost > a.spend_budget THEN 'quota_spend_budget'
    ELSE 'accepted' END;
  IF decided = 'accepted' THEN
    SELECT * INTO j FROM job_accept(p_document, p_tenant, p_sha256, p_version, p_content,
                                    p_bytes, p_content_type, p_filename, p_job, p_key,
                                    p_request_hash, p_schema_version, p_model_policy,
                                    p_traceparent, p_priority, p_tokens, p_max_attempts,
                                    p_deadline_seconds, p_now, p_event, p_payload,
                                    p_event_type, p_uri, p_store_version, p_page_count);
    IF j.job_id IS NULL THEN
      -- A writer that does not take the admission lock (the job store's own
      -- accept) used the key in between: answer from its job.
      decided := 'known_key';
      SELECT * INTO a FROM tenant_admission(p_tenant, p_period, p_now, p_key, p_api_key);
    ELSE
      PERFORM spend_reserve(p_reservation, j.job_id, p_tenant, p_period, p_now, p_cost);
      a.job_id := j.job_id;
      a.request_hash := p_request_hash;
      a.deadline_at := j.deadline_at;
      a.document_id := j.document_id;
      a.accepted_state := j.accepted_state;
      a.accepted_state_version := j.accepted_state_version;
    END IF;
  END IF;
  RETURN QUERY SELECT decided, a.max_pending_jobs, a.max_pending_bytes, a.max_pending_tokens,
    a.spend_budget, a.jobs, a.bytes, a.tokens, a.spent, a.seconds_to_next_period, a.job_id,
    a.request_hash, a.deadline_at, a.document_id, a.accepted_state, a.accepted_state_version,
    a.key_state;
END
$$;
