-- Re-drive of failed jobs (issue 20, item 3) and DLQ retention.
--
-- An operator may move a FAILED_TERMINAL job back to READY under the same job id
-- with a fresh attempt budget. The transition is listed here so the guard trigger
-- accepts it; the only writer is job_redrive_if_failed (sql/queries/redrive.sql),
-- which is conditional on the state and state_version the operator's selection
-- saw, and refuses a job that has a delivery or a stored result (a reviewer's
-- rejection is a human decision, not a failure to retry).
INSERT INTO job_state_transitions VALUES ('FAILED_TERMINAL', 'READY');

-- The audit row of every re-drive, written in the transaction of the state change:
-- who, why, and what the job had been through before (attempts, budget, the
-- terminal reason and error class it failed with).
CREATE TABLE job_redrives (
  id                   uuid PRIMARY KEY,
  job_id               uuid NOT NULL REFERENCES extraction_jobs(id),
  tenant_id            uuid NOT NULL REFERENCES tenants(id),
  requested_by         text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  reason               text NOT NULL CHECK (length(reason) BETWEEN 1 AND 4000),
  attempts_before      integer NOT NULL CHECK (attempts_before >= 0),
  max_attempts_before  integer NOT NULL CHECK (max_attempts_before >= 1),
  max_attempts_after   integer NOT NULL,
  terminal_reason      text NOT NULL,
  error_class          text,
  from_state_version   bigint NOT NULL,
  to_state_version     bigint NOT NULL,
  deadline_at          timestamptz NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  CHECK (max_attempts_after > attempts_before),
  CHECK (to_state_version > from_state_version)
);
CREATE INDEX job_redrives_job ON job_redrives (job_id, created_at);
CREATE INDEX job_redrives_tenant ON job_redrives (tenant_id, created_at DESC);

-- Selection by tenant + error class + time range: the tenant's failed jobs by
-- the time they failed.
CREATE INDEX extraction_jobs_tenant_failed ON extraction_jobs (tenant_id, finished_at)
  WHERE state = 'FAILED_TERMINAL';

-- DLQ retention: the maintenance actor deletes letters archived longer ago than
-- the configured age, with their replay audit rows (which reference them).
-- dead_letters_archived (archived_at DESC, id) serves that scan.
