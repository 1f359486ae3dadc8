-- Status reads for the API: every query is scoped by tenant, so another
-- tenant's job reads exactly like a missing one.

-- name: database_ping
SELECT 1;

-- name: attempt_list_for_tenant_job
SELECT a.attempt, a.fence, a.worker_id, a.started_at, a.ended_at, a.outcome, a.error_class,
       a.error_detail, a.engine, a.prompt_tokens, a.completion_tokens, a.cached_tokens,
       a.uncertain, a.late_result_at
FROM job_attempts a JOIN extraction_jobs j ON j.id = a.job_id
WHERE a.job_id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
ORDER BY a.fence;

-- name: job_list_page_for_tenant
-- Keyset page, newest first. $2 state filter (NULL = any), $3/$4 the cursor
-- (created_at, id) of the last row of the previous page (NULL = first page).
SELECT j.id, j.state, j.state_version, j.attempt, j.max_attempts, j.created_at,
       j.updated_at, j.finished_at, j.deadline_at, j.terminal_reason
FROM extraction_jobs j
WHERE j.tenant_id = $1
  AND ($2::text IS NULL OR j.state = $2)
  AND ($3::timestamptz IS NULL OR (j.created_at, j.id) < ($3::timestamptz, $4::uuid))
ORDER BY j.created_at DESC, j.id DESC
LIMIT $5;

-- name: job_event_list_for_tenant_job_after
SELECT e.seq, e.job_id, e.from_state, e.to_state, e.state_version, e.created_at
FROM job_events e
WHERE e.job_id = $1 AND e.tenant_id IS NOT DISTINCT FROM $2 AND e.seq > $3
ORDER BY e.seq
LIMIT $4;

-- name: job_event_list_for_tenant_after
SELECT e.seq, e.job_id, e.from_state, e.to_state, e.state_version, e.created_at
FROM job_events e
WHERE e.tenant_id = $1 AND e.seq > $2
ORDER BY e.seq
LIMIT $3;

-- name: job_event_get_latest_for_tenant_job
-- The newest event of one job: the snapshot's cursor and state.
SELECT e.seq, e.job_id, e.from_state, e.to_state, e.state_version, e.created_at
FROM job_events e
WHERE e.job_id = $1 AND e.tenant_id IS NOT DISTINCT FROM $2
ORDER BY e.seq DESC
LIMIT 1;

-- name: job_event_get_cursor_for_tenant
SELECT coalesce(max(e.seq), 0) AS seq FROM job_events e WHERE e.tenant_id = $1;

-- name: job_list_unsettled_for_tenant
-- A tenant-wide fresh snapshot: its unfinished (and review) jobs, newest change first.
SELECT j.id AS job_id, j.state, j.state_version, j.updated_at
FROM extraction_jobs j
WHERE j.tenant_id = $1
  AND j.state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED', 'REVIEW_REQUIRED')
ORDER BY j.updated_at DESC, j.id DESC
LIMIT $2;
