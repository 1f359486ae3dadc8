-- Retention (issue 46, item 1): what a settled job keeps, and for how long.
--
-- Two horizons per tenant, counted from a final job's finished_at (SUCCEEDED,
-- FAILED_TERMINAL, CANCELLED; a job awaiting review keeps everything):
--   * content_days (default 30): the job's content goes: the extracted result and
--     its validation detail, the document's text (documents.content,
--     document_texts), the payload copies of its finished deliveries, and the
--     object-store bytes the service itself wrote for it. What stays is the audit
--     skeleton: the job row (states, fence, request hash), the document row
--     (sha256, size, media type), the result's decision, attempts, review decisions,
--     deliveries' body_sha256.
--   * audit_days (default 365): the skeleton's append-only history goes too
--     (job_events and execution_inbox rows).
-- A tenant without a row here has the defaults. A legal hold (the tenant's, here,
-- or one job's, job_legal_holds) stops both. pipeline/jobs/retention.py runs it.
CREATE TABLE tenant_retention (
  tenant_id    uuid PRIMARY KEY REFERENCES tenants(id),
  content_days integer NOT NULL DEFAULT 30 CHECK (content_days BETWEEN 1 AND 36500),
  audit_days   integer NOT NULL DEFAULT 365 CHECK (audit_days BETWEEN 1 AND 36500),
  legal_hold   boolean NOT NULL DEFAULT false,
  hold_reason  text,
  updated_at   timestamptz NOT NULL DEFAULT now(),
  CHECK (audit_days >= content_days),
  CHECK (legal_hold = (hold_reason IS NOT NULL))
);

CREATE TABLE job_legal_holds (
  job_id     uuid PRIMARY KEY REFERENCES extraction_jobs(id),
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  reason     text NOT NULL,
  held_by    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Every hold set or cleared, the tenant's (job_id NULL) or a job's: who, when, why.
CREATE TABLE legal_hold_events (
  seq        bigserial PRIMARY KEY,
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  job_id     uuid REFERENCES extraction_jobs(id),
  action     text NOT NULL CHECK (action IN ('set', 'cleared')),
  reason     text NOT NULL,
  actor      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX legal_hold_events_job ON legal_hold_events (job_id, seq) WHERE job_id IS NOT NULL;

-- What retention removed from a job and when (explain shows it). One row per job
-- whose content went; audit_removed_at is set when its history went too.
CREATE TABLE job_retention_marks (
  job_id             uuid PRIMARY KEY REFERENCES extraction_jobs(id),
  tenant_id          uuid NOT NULL REFERENCES tenants(id),
  finished_at        timestamptz NOT NULL,
  content_removed_at timestamptz NOT NULL,
  results            integer NOT NULL,
  documents          integer NOT NULL,
  document_texts     integer NOT NULL,
  delivery_payloads  integer NOT NULL,
  audit_removed_at   timestamptz,
  job_events         integer,
  inbox_records      integer
);
CREATE INDEX job_retention_marks_audit_due ON job_retention_marks (finished_at, job_id)
  WHERE audit_removed_at IS NULL;

-- The content pass walks final jobs oldest first; the claim path's indexes
-- (READY / RETRY_SCHEDULED / RUNNING) are not touched.
CREATE INDEX extraction_jobs_final_finished ON extraction_jobs (finished_at, id)
  WHERE state IN ('SUCCEEDED', 'FAILED_TERMINAL', 'CANCELLED');
-- A document's text goes only when no job still needs it (documents are shared by
-- digest within a tenant): the jobs of one document.
CREATE INDEX extraction_jobs_document ON extraction_jobs (document_id)
  WHERE document_id IS NOT NULL;

-- A pasted text's document whose text retention removed has neither content nor a
-- reference: it says when its text went.
ALTER TABLE documents
  ADD COLUMN content_removed_at timestamptz,
  DROP CONSTRAINT documents_content_or_reference,
  ADD CONSTRAINT documents_content_or_reference CHECK (
    (content IS NOT NULL AND uri IS NULL AND version IS NULL AND content_removed_at IS NULL)
    OR (content IS NULL AND uri IS NOT NULL AND version IS NOT NULL)
    OR (content IS NULL AND uri IS NULL AND version IS NULL AND content_removed_at IS NOT NULL)
  );

-- A delivery's body stays immutable, except that retention may empty the payload
-- copy of a finished delivery (its body_sha256 stays as the digest).
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
  IF NEW.id <> OLD.id OR (NEW.body IS DISTINCT FROM OLD.body AND NOT (
       NEW.body = ''::bytea AND NEW.state = OLD.state
       AND OLD.state IN ('delivered', 'failed', 'abandoned'))) THEN
    RAISE EXCEPTION 'delivery % id and body are immutable', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END $$;

-- A document whose content retention removed comes back whole when the same bytes
-- are accepted again: the upsert restores the text it no longer holds (before,
-- it kept the row as it was, which would have left a new job without its text).
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
    ON CONFLICT (tenant_id, sha256) DO UPDATE
      SET content = coalesce(documents.content, EXCLUDED.content),
          content_removed_at = CASE WHEN EXCLUDED.content IS NULL
                                    THEN documents.content_removed_at END
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
