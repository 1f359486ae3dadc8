-- Erasure of a job's content (issue 46, item 2): a tenant erases one job, an operator
-- one job or a whole tenant. What goes: the document's text or file (the object store
-- included), the text a file was read as and its words, the extracted values and the
-- validation that quotes them, the duplicate-detection identity, review notes and
-- corrections' values, error details and the bodies of the job's deliveries. What
-- stays is the audit skeleton: states, fences, attempts, digests (the document's
-- SHA-256, each delivery body's SHA-256, the result's SHA-256 kept here), decisions
-- and a tombstone (job_erasures) saying who erased what and when. The erasure writes
-- a job_events row (detail 'content_erased') in its transaction.
--
-- A documents row is shared by a tenant's jobs that sent the same bytes (one row per
-- tenant and SHA-256), and the embedded store's file by every tenant that sent them:
-- a row's content goes only when no job that is not erased refers to it, and a file
-- only when no documents row that is not erased names it.

ALTER TABLE documents ADD COLUMN erased_at timestamptz;
ALTER TABLE documents DROP CONSTRAINT documents_content_or_reference;
-- (with migration 031's: a pasted text retention removed says when it went)
ALTER TABLE documents ADD CONSTRAINT documents_content_or_reference CHECK (
  (content IS NOT NULL AND uri IS NULL AND version IS NULL AND erased_at IS NULL
   AND content_removed_at IS NULL)
  OR (content IS NULL AND uri IS NOT NULL AND version IS NOT NULL)
  OR (content IS NULL AND uri IS NULL AND version IS NULL
      AND (erased_at IS NOT NULL OR content_removed_at IS NOT NULL))
);
-- The reference count of a stored object (document_uri_in_use). A hash index serves
-- only uri = $1, so no plan reads a row named by its primary key through it
-- (tests/integration/test_query_plans.py).
CREATE INDEX documents_uri ON documents USING hash (uri);

-- One tombstone per erased job: who, why, when, what the job was, and what became of
-- its document (erased, or kept because another job refers to it), its stored object
-- (removed, kept because another document names it, or a client's object Fenceline
-- does not own) and its deliveries (those not yet sent abandoned, those sent
-- reported: a sent delivery is never recalled). rows: the rows each table lost or had
-- blanked, by table name.
CREATE TABLE job_erasures (
  id                    uuid PRIMARY KEY,
  job_id                uuid NOT NULL UNIQUE REFERENCES extraction_jobs(id),
  tenant_id             uuid NOT NULL REFERENCES tenants(id),
  requested_by          text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  reason                text CHECK (length(reason) <= 4000),
  job_state             text NOT NULL,
  cancelled_first       boolean NOT NULL DEFAULT false,
  document_id           uuid REFERENCES documents(id),
  document_sha256       text CHECK (document_sha256 ~ '^[0-9a-f]{64}$'),
  document_erased       boolean NOT NULL,
  result_sha256         text CHECK (result_sha256 ~ '^[0-9a-f]{64}$'),
  object_uri            text,
  object_version        text,
  object_outcome        text CHECK (object_outcome IN
                          ('pending', 'removed', 'shared', 'client_object')),
  object_removed_at     timestamptz,
  deliveries_abandoned  uuid[] NOT NULL DEFAULT '{}',
  deliveries_sent       uuid[] NOT NULL DEFAULT '{}',
  rows                  jsonb NOT NULL CHECK (jsonb_typeof(rows) = 'object'),
  created_at            timestamptz NOT NULL DEFAULT now(),
  CHECK ((object_uri IS NULL) = (object_outcome IS NULL)),
  CHECK ((object_outcome = 'removed') = (object_removed_at IS NOT NULL))
);
CREATE INDEX job_erasures_tenant ON job_erasures (tenant_id, created_at DESC);

-- job_accept of migration 031 (same signature), except that a tenant sending bytes
-- whose documents row was erased gets the row back with the new content or reference
-- (as 031 gives back a text retention removed). The rest of the body is unchanged.
CREATE OR REPLACE FUNCTION job_accept(p_document uuid, p_tenant uuid, p_sha256 text, p_version text,
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
    ON CONFLICT (tenant_id, sha256) DO UPDATE SET
      content = CASE WHEN documents.erased_at IS NULL
                     THEN coalesce(documents.content, EXCLUDED.content)
                     ELSE EXCLUDED.content END,
      content_removed_at = CASE WHEN EXCLUDED.content IS NULL
                                THEN documents.content_removed_at END,
      uri = CASE WHEN documents.erased_at IS NULL THEN documents.uri ELSE EXCLUDED.uri END,
      version = CASE WHEN documents.erased_at IS NULL THEN documents.version
                     ELSE EXCLUDED.version END,
      filename = CASE WHEN documents.erased_at IS NULL THEN documents.filename
                      ELSE EXCLUDED.filename END,
      erased_at = NULL
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
-- deliveries_guard of migration 031, widened: a body may be emptied by erasure in any
-- state as well as by retention once finished (replaced by no bytes; its body_sha256
-- stays, the digest of what was sent); and a delivery whose body is empty never goes
-- back to pending or in flight, so nothing sends an empty body.
CREATE OR REPLACE FUNCTION deliveries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT EXISTS (
       SELECT 1 FROM delivery_state_transitions
       WHERE from_state = OLD.state AND to_state = NEW.state) THEN
    RAISE EXCEPTION 'illegal delivery transition % -> % for %', OLD.state, NEW.state, OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.fence < OLD.fence OR NEW.attempts < OLD.attempts THEN
    RAISE EXCEPTION 'fence or attempts of delivery % would decrease', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.body_sha256 <> OLD.body_sha256
     OR (NEW.body IS DISTINCT FROM OLD.body AND NEW.body <> '\x'::bytea) THEN
    RAISE EXCEPTION 'delivery % id and body are immutable', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.body = '\x'::bytea AND NEW.state IS DISTINCT FROM OLD.state
     AND NEW.state IN ('pending', 'in_flight') THEN
    RAISE EXCEPTION 'delivery % was erased: it is never sent', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END $$;
