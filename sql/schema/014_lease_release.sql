-- Lease release by a draining driver (issue 20, item 2: driver autoscaling).
--
-- A driver the autoscaler scales down stops claiming, lets its attempts finish
-- within a grace period and gives back the leases still running
-- (job_release_if_fenced: RETRY_SCHEDULED due now under fence + 1), so no lease
-- is left to expire and wait for the reaper. Its attempt row closes with the
-- outcome 'released'.
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_outcome_check;
ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_outcome_check CHECK (outcome IN
  ('running','succeeded','review_required','retry_scheduled','failed_terminal',
   'lease_expired','released'));
