-- Human review of REVIEW_REQUIRED jobs. The state change is conditional on the
-- tenant, the state and the state_version the reviewer saw; the caller checks
-- the row count and writes the audit row in the same transaction.

-- name: job_decide_review_if_pending
-- $1 job, $2 tenant, $3 expected state_version, $4 'SUCCEEDED' | 'FAILED_TERMINAL'.
UPDATE extraction_jobs
SET state = $4,
    terminal_reason = CASE WHEN $4 = 'FAILED_TERMINAL' THEN 'review_rejected' END,
    last_error_class = CASE WHEN $4 = 'FAILED_TERMINAL' THEN 'review_rejected' END,
    last_error = NULL
WHERE id = $1 AND tenant_id = $2 AND state = 'REVIEW_REQUIRED' AND state_version = $3
RETURNING id, tenant_id, state, state_version, attempt, fence;

-- name: job_get_review_state_for_tenant
-- Why a review write matched no row: the job's current state, if the tenant may see it.
SELECT state, state_version FROM extraction_jobs WHERE id = $1 AND tenant_id = $2;

-- name: review_decision_insert
INSERT INTO review_decisions (id, job_id, tenant_id, api_key_id, decision, note,
                              from_state_version, to_state, to_state_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, created_at;
