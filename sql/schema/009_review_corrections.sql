-- Reviewer corrections (issue 18): a reviewer edits values of a REVIEW_REQUIRED
-- job's result, validation runs again on the corrected result, and the job moves
-- to SUCCEEDED only when the new report holds no reason the reviewer did not
-- override by name with a note. One row per correction, written in the
-- transaction that replaces the result, so `fenceline explain` shows every value
-- a person changed: before and after, the reasons before and after, the reasons
-- overridden, who (the API key) and when.
CREATE TABLE review_corrections (
  id                  uuid PRIMARY KEY,
  job_id              uuid NOT NULL REFERENCES extraction_jobs(id),
  tenant_id           uuid NOT NULL REFERENCES tenants(id),
  api_key_id          uuid NOT NULL REFERENCES api_keys(id),
  from_state_version  bigint NOT NULL,
  to_state            text NOT NULL CHECK (to_state IN ('REVIEW_REQUIRED', 'SUCCEEDED')),
  to_state_version    bigint NOT NULL,
  changes             jsonb NOT NULL CHECK (jsonb_typeof(changes) = 'array'),  -- [{field, before, after}]
  reasons_before      jsonb NOT NULL CHECK (jsonb_typeof(reasons_before) = 'array'),
  reasons_after       jsonb NOT NULL CHECK (jsonb_typeof(reasons_after) = 'array'),
  overrides           jsonb NOT NULL DEFAULT '[]'::jsonb
                        CHECK (jsonb_typeof(overrides) = 'array'),   -- [{code, field}]
  note                text,
  created_at          timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT note_when_overriding CHECK (
    jsonb_array_length(overrides) = 0 OR length(btrim(coalesce(note, ''))) > 0)
);
CREATE INDEX review_corrections_job ON review_corrections (job_id, created_at);

-- The review queue: a tenant's REVIEW_REQUIRED jobs, oldest first.
CREATE INDEX extraction_jobs_review_queue ON extraction_jobs (tenant_id, finished_at, id)
  WHERE state = 'REVIEW_REQUIRED';
