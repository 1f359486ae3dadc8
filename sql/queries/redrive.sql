-- Re-drive of FAILED_TERMINAL jobs (issue 20): an operator gives a failed job a
-- fresh attempt budget under the same id. Every read is tenant-scoped; the state
-- change is conditional on the state and state_version the selection saw.

-- name: job_lock_for_redrive
-- $1 job, $2 tenant. Locks the job and says whether anything forbids a re-drive:
-- a delivery (the result may already be in the ERP) or a stored result (a
-- reviewer's rejection, not a failure to retry).
SELECT j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.max_attempts,
       j.terminal_reason, j.last_error_class, j.schema_version, j.estimated_tokens,
       EXISTS (SELECT 1 FROM deliveries d WHERE d.job_id = j.id) AS has_delivery,
       EXISTS (SELECT 1 FROM extraction_results r WHERE r.job_id = j.id) AS has_result
FROM extraction_jobs j
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
FOR UPDATE OF j;

-- name: job_select_redrivable
-- $1 tenant, $2 error class (NULL = any), $3 failed at or after (NULL = any),
-- $4 failed before (NULL = any), $5 limit. Oldest failure first; SKIP LOCKED so
-- two operators' selections do not wait on each other (the state guard still
-- decides each job).
SELECT j.id
FROM extraction_jobs j
WHERE j.tenant_id = $1 AND j.state = 'FAILED_TERMINAL'
  AND ($2::text IS NULL OR j.last_error_class = $2)
  AND ($3::timestamptz IS NULL OR j.finished_at >= $3)
  AND ($4::timestamptz IS NULL OR j.finished_at < $4)
ORDER BY j.finished_at, j.id
LIMIT $5;

-- name: job_redrive_if_failed
-- $1 job, $2 tenant, $3 expected state_version, $4 fresh attempts, $5 deadline
-- seconds, $6 now. The attempt counter never resets (the guard trigger forbids
-- it): the budget grows to attempt + $4. The fence stays; the next claim bumps it.
UPDATE extraction_jobs
SET state = 'READY', max_attempts = attempt + $4,
    available_at = coalesce($6::timestamptz, now()),
    deadline_at = coalesce($6::timestamptz, now()) + make_interval(secs => $5),
    finished_at = NULL, terminal_reason = NULL, last_error_class = NULL, last_error = NULL
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM 'FAILED_TERMINAL' AND state_version = $3
  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_id = $1)
  AND NOT EXISTS (SELECT 1 FROM extraction_results r WHERE r.job_id = $1)
RETURNING id, tenant_id, state, state_version, attempt, max_attempts, fence, deadline_at;

-- name: job_redrive_insert
INSERT INTO job_redrives (id, job_id, tenant_id, requested_by, reason, attempts_before,
                          max_attempts_before, max_attempts_after, terminal_reason,
                          error_class, from_state_version, to_state_version, deadline_at,
                          created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
        coalesce($14::timestamptz, now()))
RETURNING id, created_at;

-- name: job_redrive_list_for_job
SELECT id, requested_by, reason, attempts_before, max_attempts_before, max_attempts_after,
       terminal_reason, error_class, from_state_version, to_state_version, deadline_at,
       created_at
FROM job_redrives WHERE job_id = $1 ORDER BY created_at, id;
