-- Human review of REVIEW_REQUIRED jobs. The state change is conditional on the
-- tenant, the state and the state_version the reviewer saw; the caller checks
-- the row count and writes the audit row in the same transaction.

-- name: job_decide_review_if_pending
-- $1 job, $2 tenant, $3 expected state_version, $4 'SUCCEEDED' | 'FAILED_TERMINAL'.
-- Approval also needs a result that passed schema validation: raw model output
-- (validation.schema_valid = false) may only be rejected; so may a result holding
-- values the job's schema_version has no place for (contract_v3_required): approving
-- it would deliver them to a client that asked for contract v1.
UPDATE extraction_jobs j
SET state = $4,
    terminal_reason = CASE WHEN $4 = 'FAILED_TERMINAL' THEN 'review_rejected' END,
    last_error_class = CASE WHEN $4 = 'FAILED_TERMINAL' THEN 'review_rejected' END,
    last_error = NULL
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2 AND j.state IS NOT DISTINCT FROM 'REVIEW_REQUIRED' AND j.state_version = $3
  AND ($4 <> 'SUCCEEDED' OR NOT EXISTS (
        SELECT 1 FROM extraction_results r
        WHERE r.job_id = j.id
          AND (r.validation @> '{"schema_valid": false}'::jsonb
               OR r.validation @> '{"reasons": [{"code": "contract_v3_required"}]}'::jsonb)))
RETURNING j.id, j.tenant_id, j.state, j.state_version, j.attempt, j.fence, j.created_at,
          j.finished_at;

-- name: job_get_review_state_for_tenant
-- The job's current state, if the tenant may see it, whether its result passed
-- schema validation and whether it needs contract v3 the job did not ask for (only a
-- result that did the one and does not the other may be approved).
SELECT j.state, j.state_version,
       NOT EXISTS (SELECT 1 FROM extraction_results r
                   WHERE r.job_id = j.id
                     AND r.validation @> '{"schema_valid": false}'::jsonb) AS schema_valid,
       EXISTS (SELECT 1 FROM extraction_results r
               WHERE r.job_id = j.id
                 AND r.validation @> '{"reasons": [{"code": "contract_v3_required"}]}'::jsonb)
         AS contract_v3_required
FROM extraction_jobs j WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2;

-- name: review_decision_insert
INSERT INTO review_decisions (id, job_id, tenant_id, api_key_id, decision, note,
                              from_state_version, to_state, to_state_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, created_at;

-- name: review_subject_get_for_tenant_for_update
-- What a correction works on, locked: the job (if the tenant may see it), its OCR
-- text and its result. Another tenant's job reads as a missing one.
-- ocr_text is sealed under the tenant's data key (migration 039) to the document's
-- SHA-256: the caller opens it.
SELECT j.id, j.tenant_id, j.state, j.state_version,
       coalesce(d.content, t.content) AS ocr_text, r.result, r.validation,
       d.sha256 AS document_sha256
FROM extraction_jobs j
LEFT JOIN documents d ON d.id = j.document_id
LEFT JOIN document_texts t ON t.document_id = d.id AND t.tenant_id = d.tenant_id
LEFT JOIN extraction_results r ON r.job_id = j.id
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
FOR UPDATE OF j;

-- name: review_result_replace_if_pending
-- A correction's new result and report. The job stays REVIEW_REQUIRED, and its
-- state_version moves on (set here: the guard trigger bumps it only for state and
-- fence changes), so a decision made on the uncorrected view is refused as stale.
-- $1 job, $2 tenant, $3 expected state_version, $4 result, $5 validation,
-- $6 review reasons summary, $7 validation policy version.
WITH job AS (
  UPDATE extraction_jobs
  SET state_version = state_version + 1, last_error = $6, validation_policy = $7
  WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM 'REVIEW_REQUIRED' AND state_version = $3
  RETURNING id, state_version
), res AS (
  UPDATE extraction_results r SET result = $4, validation = $5
  FROM job WHERE r.job_id = job.id
  RETURNING r.job_id
)
SELECT job.state_version FROM job JOIN res ON res.job_id = job.id;

-- name: review_correction_insert
INSERT INTO review_corrections (id, job_id, tenant_id, api_key_id, from_state_version,
                                to_state, to_state_version, changes, reasons_before,
                                reasons_after, overrides, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING id, created_at;

-- name: review_correction_list_for_job
-- The corrections of one job, oldest first (console, explain). $1 job, $2 tenant.
SELECT c.id, c.api_key_id, k.key_prefix, k.label AS key_label, c.from_state_version, c.to_state,
       c.to_state_version, c.changes, c.reasons_before, c.reasons_after, c.overrides, c.note,
       c.created_at
FROM review_corrections c
LEFT JOIN api_keys k ON k.id = c.api_key_id AND k.tenant_id = c.tenant_id
WHERE c.job_id = $1 AND c.tenant_id = $2 ORDER BY c.created_at, c.id;

-- name: review_decision_list_for_job
-- The decisions on one job, oldest first (explain). $1 job, $2 tenant.
SELECT d.id, d.decision, d.note, d.from_state_version, d.to_state, d.to_state_version,
       d.created_at, d.api_key_id, k.key_prefix, k.label AS key_label
FROM review_decisions d LEFT JOIN api_keys k ON k.id = d.api_key_id AND k.tenant_id = d.tenant_id
WHERE d.job_id = $1 AND d.tenant_id = $2
ORDER BY d.created_at, d.id;
