-- Job cancellation (issue 46, item 4): a tenant or an operator cancels a job that
-- has not settled; CANCELLED is a new final state.
--
-- CANCELLED is reached from READY, RETRY_SCHEDULED or RUNNING, only by
-- job_cancel_if_cancellable (sql/queries/cancellation.sql), which is conditional
-- on the state and state_version the lock saw. Cancelling RUNNING bumps the fence,
-- so the running attempt's late commit matches no row and is recorded as a stale
-- result (attempt_record_late_result), never applied. Nothing leaves CANCELLED.
ALTER TABLE extraction_jobs DROP CONSTRAINT extraction_jobs_state_check;
ALTER TABLE extraction_jobs ADD CONSTRAINT extraction_jobs_state_check CHECK (state IN
  ('READY','RUNNING','RETRY_SCHEDULED','SUCCEEDED','REVIEW_REQUIRED','FAILED_TERMINAL',
   'CANCELLED'));
ALTER TABLE extraction_jobs DROP CONSTRAINT finished_exactly_when_settled;
ALTER TABLE extraction_jobs ADD CONSTRAINT finished_exactly_when_settled CHECK (
  (finished_at IS NOT NULL) = (state IN ('SUCCEEDED','REVIEW_REQUIRED','FAILED_TERMINAL',
                                         'CANCELLED')));

INSERT INTO job_state_transitions VALUES
  ('READY', 'CANCELLED'), ('RETRY_SCHEDULED', 'CANCELLED'), ('RUNNING', 'CANCELLED');

-- The attempt a cancellation cut short closes with the outcome 'cancelled'
-- (uncertain: the provider may still bill the call in flight).
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_outcome_check;
ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_outcome_check CHECK (outcome IN
  ('running','succeeded','review_required','retry_scheduled','failed_terminal',
   'lease_expired','released','cancelled'));

-- The audit row of every cancellation, written in the transaction of the state
-- change: who, why, when, the state and fence it cut short, and what became of the
-- job's deliveries (those not yet sent were abandoned; those already sent or in
-- flight are reported, never recalled).
CREATE TABLE job_cancellations (
  id                    uuid PRIMARY KEY,
  job_id                uuid NOT NULL UNIQUE REFERENCES extraction_jobs(id),
  tenant_id             uuid NOT NULL REFERENCES tenants(id),
  requested_by          text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  reason                text CHECK (length(reason) <= 4000),
  from_state            text NOT NULL CHECK (from_state IN ('READY','RETRY_SCHEDULED','RUNNING')),
  from_state_version    bigint NOT NULL,
  to_state_version      bigint NOT NULL,
  fence_before          bigint NOT NULL,
  fence_after           bigint NOT NULL,
  deliveries_cancelled  uuid[] NOT NULL DEFAULT '{}',
  deliveries_sent       uuid[] NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL DEFAULT now(),
  CHECK (to_state_version > from_state_version),
  CHECK (fence_after >= fence_before),
  CHECK ((from_state = 'RUNNING') = (fence_after > fence_before))
);
CREATE INDEX job_cancellations_tenant ON job_cancellations (tenant_id, created_at DESC);

-- The operator's bulk cancel selects a tenant's jobs by state and age.
CREATE INDEX extraction_jobs_tenant_cancellable ON extraction_jobs (tenant_id, state, created_at)
  WHERE state IN ('READY', 'RETRY_SCHEDULED', 'RUNNING');
