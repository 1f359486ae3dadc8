-- Cancellation of unsettled jobs (issue 46): a tenant or an operator moves a
-- READY, RETRY_SCHEDULED or RUNNING job to CANCELLED. Every read is tenant-scoped;
-- the state change is conditional on the state and state_version the lock saw.

-- name: job_lock_for_cancel
-- $1 job, $2 tenant. Locks the job (another tenant's job is no row).
SELECT j.id, j.tenant_id, j.state, j.state_version, j.fence, j.attempt
FROM extraction_jobs j
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
FOR UPDATE OF j;

-- name: job_cancel_if_cancellable
-- $1 job, $2 tenant, $3 expected state, $4 expected state_version, $5 detail,
-- $6 now. Cancelling RUNNING bumps the fence and drops the lease, so the running
-- attempt's late commit matches no row (it is recorded as a stale result).
UPDATE extraction_jobs
SET state = 'CANCELLED',
    fence = CASE WHEN state = 'RUNNING' THEN fence + 1 ELSE fence END,
    lease_until = NULL, lease_owner = NULL,
    finished_at = coalesce($6::timestamptz, now()),
    terminal_reason = 'cancelled', last_error_class = 'cancelled', last_error = $5
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM $3
  AND state IN ('READY', 'RETRY_SCHEDULED', 'RUNNING') AND state_version = $4
RETURNING id, tenant_id, state, state_version, attempt, fence, created_at, finished_at;

-- name: delivery_cancel_unsent_for_job
-- $1 job, $2 tenant. Deliveries not yet sent are abandoned (never sent); those in
-- flight or delivered are only reported: a sent webhook is never recalled.
WITH unsent AS (
  UPDATE deliveries
  SET state = 'abandoned', final_reason = 'job_cancelled'
  WHERE job_id = $1 AND tenant_id = $2 AND state IN ('pending', 'retry_scheduled')
  RETURNING id
)
SELECT coalesce((SELECT array_agg(id ORDER BY id) FROM unsent), '{}'::uuid[]) AS cancelled,
       coalesce((SELECT array_agg(d.id ORDER BY d.id) FROM deliveries d
                 WHERE d.job_id = $1 AND d.tenant_id = $2
                   AND d.state IN ('in_flight', 'delivered')), '{}'::uuid[]) AS sent;

-- name: job_cancellation_insert
INSERT INTO job_cancellations (id, job_id, tenant_id, requested_by, reason, from_state,
                               from_state_version, to_state_version, fence_before,
                               fence_after, deliveries_cancelled, deliveries_sent, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($13::timestamptz, now()))
RETURNING id, job_id, tenant_id, requested_by, reason, from_state, from_state_version,
          to_state_version, fence_before, fence_after, deliveries_cancelled, deliveries_sent,
          created_at;

-- name: job_cancellation_get_for_tenant
-- $1 job, $2 tenant: the cancellation of a CANCELLED job (an idempotent repeat).
SELECT id, job_id, tenant_id, requested_by, reason, from_state, from_state_version,
       to_state_version, fence_before, fence_after, deliveries_cancelled, deliveries_sent,
       created_at
FROM job_cancellations WHERE job_id = $1 AND tenant_id IS NOT DISTINCT FROM $2;

-- name: job_cancellation_list_for_job
SELECT id, requested_by, reason, from_state, from_state_version, to_state_version,
       fence_before, fence_after, deliveries_cancelled, deliveries_sent, created_at
FROM job_cancellations WHERE job_id = $1 ORDER BY created_at, id;

-- name: job_select_cancellable
-- $1 tenant, $2 states (a subset of READY, RETRY_SCHEDULED, RUNNING), $3 created
-- before (NULL = any), $4 limit. Oldest first.
SELECT j.id, j.state, j.created_at
FROM extraction_jobs j
WHERE j.tenant_id = $1 AND j.state = ANY($2::text[])
  AND j.state IN ('READY', 'RETRY_SCHEDULED', 'RUNNING')
  AND ($3::timestamptz IS NULL OR j.created_at < $3)
ORDER BY j.created_at, j.id
LIMIT $4;
