-- Erasure of a job's content (issue 46, item 2; migration 032). Every read and write
-- names the tenant (IS NOT DISTINCT FROM beside a primary key, so a cached generic plan
-- still reads the row by its key: tests/integration/test_query_plans.py). Whether a
-- stored object is still needed, across tenants, is sql/queries/object_removal.sql.

-- name: job_lock_for_erase
-- $1 job, $2 tenant. Locks the job (another tenant's job is no row).
SELECT j.id, j.tenant_id, j.state, j.state_version, j.fence, j.attempt, j.document_id
FROM extraction_jobs j
WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
FOR UPDATE OF j;

-- name: job_erasure_get_for_tenant
-- $1 job, $2 tenant: the tombstone of an erased job (an idempotent repeat).
SELECT id, job_id, tenant_id, requested_by, reason, job_state, cancelled_first, document_id,
       document_sha256, document_erased, result_sha256, object_uri, object_version,
       object_outcome, object_removed_at, deliveries_abandoned, deliveries_sent, rows,
       created_at
FROM job_erasures WHERE job_id = $1 AND tenant_id = $2;

-- name: job_erasure_list_for_job
SELECT id, requested_by, reason, job_state, cancelled_first, document_sha256,
       document_erased, result_sha256, object_uri, object_outcome, object_removed_at,
       deliveries_abandoned, deliveries_sent, rows, created_at
FROM job_erasures WHERE job_id = $1 ORDER BY created_at, id;

-- name: result_erase_for_job
-- $1 job, $2 tenant. The extracted values and the validation's details, which quote
-- them, go; the decision, the reasons' codes and fields, and the fence stay. Returns the SHA-256 of the result as it was.
WITH old AS (
  SELECT r.job_id, encode(sha256(convert_to(r.result::text, 'UTF8')), 'hex') AS result_sha256
  FROM extraction_results r JOIN extraction_jobs j ON j.id = r.job_id
  WHERE r.job_id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
  FOR UPDATE OF r
)
UPDATE extraction_results r
SET result = '{}'::jsonb,
    validation = jsonb_strip_nulls(jsonb_build_object(
      'decision', r.validation -> 'decision',
      'reasons', CASE WHEN jsonb_typeof(r.validation -> 'reasons') = 'array' THEN
        (SELECT coalesce(jsonb_agg(jsonb_build_object('code', x -> 'code', 'field', x -> 'field')),
                         '[]'::jsonb)
         FROM jsonb_array_elements(r.validation -> 'reasons') x) END))
FROM old WHERE r.job_id = old.job_id
RETURNING old.result_sha256;

-- name: invoice_identity_delete_for_job
-- $1 job, $2 tenant. Duplicate detection forgets the erased invoice.
DELETE FROM invoice_identities WHERE job_id = $1 AND tenant_id = $2;

-- name: invoice_near_keys_delete_for_job
-- $1 job, $2 tenant. The near-duplicate keys (migration 033) are keyed hashes, not
-- plaintext, but they are derived from the erased invoice: they go with it.
DELETE FROM invoice_near_keys WHERE job_id = $1 AND tenant_id = $2;

-- name: delivery_erase_for_job
-- $1 job, $2 tenant. Deliveries waiting to be sent are abandoned; the bodies of all go,
-- their SHA-256 stays. Those in flight, delivered, or delivered once before a tenant's
-- resend put them back to pending (an attempt delivered) are reported as sent: the
-- receiver's copy is never recalled.
WITH unsent AS (
  UPDATE deliveries
  SET state = 'abandoned', final_reason = 'job_erased'
  WHERE job_id = $1 AND tenant_id = $2 AND state IN ('pending', 'retry_scheduled')
  RETURNING id
),
sent AS (
  SELECT d.id FROM deliveries d
  WHERE d.job_id = $1 AND d.tenant_id = $2
    AND (d.state IN ('in_flight', 'delivered')
         OR EXISTS (SELECT 1 FROM delivery_attempts a
                    WHERE a.delivery_id = d.id AND a.outcome = 'delivered'))
),
blanked AS (
  UPDATE deliveries SET body = '\x'::bytea
  WHERE job_id = $1 AND tenant_id = $2 AND body <> '\x'::bytea
  RETURNING id
)
SELECT coalesce((SELECT array_agg(id ORDER BY id) FROM unsent), '{}'::uuid[]) AS abandoned,
       coalesce((SELECT array_agg(id ORDER BY id) FROM sent), '{}'::uuid[]) AS sent,
       (SELECT count(*) FROM blanked) AS blanked;

-- name: review_correction_erase_for_job
-- $1 job, $2 tenant. A correction keeps which fields changed and its reasons' codes and fields,
-- not the values before and after, nor its note (migration 046's functions).
UPDATE review_corrections c
SET changes = correction_fields(c.changes),
    reasons_before = reason_codes(c.reasons_before),
    reasons_after = reason_codes(c.reasons_after),
    note = CASE WHEN jsonb_array_length(c.overrides) > 0 THEN '(erased)' END
WHERE c.job_id = $1 AND c.tenant_id = $2;

-- name: review_decision_erase_for_job
-- $1 job, $2 tenant. A decision keeps approve or reject, not its note.
UPDATE review_decisions SET note = '(erased)'
WHERE job_id = $1 AND tenant_id = $2 AND note <> '(erased)';

-- name: attempt_erase_details_for_job
-- $1 job, $2 tenant. An error's class stays; its detail may quote the document.
UPDATE job_attempts a SET error_detail = NULL
FROM extraction_jobs j
WHERE a.job_id = $1 AND j.id = a.job_id AND j.tenant_id IS NOT DISTINCT FROM $2
  AND a.error_detail IS NOT NULL;

-- name: job_erase_error_if_locked
-- $1 job, $2 tenant. The job's last error detail goes (its class and reason stay);
-- neither state nor fence changes, so no job event is written by the trigger.
UPDATE extraction_jobs SET last_error = NULL
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND last_error IS NOT NULL;

-- name: document_erase_if_unreferenced
-- $1 document, $2 tenant, $3 the job being erased, $4 now. The content (a pasted
-- text) and the file name go, the digest and where the bytes were stay, only when
-- every job that refers to the row is erased (or is this one). No row: kept.
UPDATE documents d
SET content = NULL, filename = NULL, erased_at = coalesce($4::timestamptz, now())
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2 AND d.erased_at IS NULL
  AND NOT EXISTS (
    SELECT 1 FROM extraction_jobs j
    WHERE j.document_id = d.id AND j.tenant_id = d.tenant_id AND j.id <> $3
      AND NOT EXISTS (SELECT 1 FROM job_erasures e WHERE e.job_id = j.id AND e.tenant_id = d.tenant_id))
RETURNING d.id, d.sha256, d.uri, d.version;

-- name: document_get_for_erase
-- $1 document, $2 tenant.
SELECT d.id, d.sha256, d.uri, d.version, d.erased_at FROM documents d
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2;

-- name: document_text_delete_for_document
-- $1 document, $2 tenant. The text a file was read as and its words.
DELETE FROM document_texts WHERE document_id = $1 AND tenant_id = $2;

-- name: job_event_insert_erased
-- $1 job, $2 tenant. The erasure's own job event: the state does not change.
INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version, fence,
                        attempt, detail)
SELECT j.id, j.tenant_id, j.state, j.state, j.state_version, j.fence, j.attempt,
       'content_erased'
FROM extraction_jobs j WHERE j.id = $1 AND j.tenant_id IS NOT DISTINCT FROM $2
RETURNING seq;

-- name: job_erasure_insert
INSERT INTO job_erasures (id, job_id, tenant_id, requested_by, reason, job_state,
                          cancelled_first, document_id, document_sha256, document_erased,
                          result_sha256, object_uri, object_version, object_outcome,
                          deliveries_abandoned, deliveries_sent, rows, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
        coalesce($18::timestamptz, now()))
ON CONFLICT (job_id) DO NOTHING
RETURNING id;

-- name: job_erasure_object_removed_if_pending
-- $1 job, $2 tenant, $3 now. The stored object is gone: recorded once.
UPDATE job_erasures
SET object_outcome = 'removed', object_removed_at = coalesce($3::timestamptz, now())
WHERE job_id = $1 AND tenant_id = $2 AND object_outcome = 'pending'
RETURNING object_removed_at;

-- name: job_count_erasable
-- $1 tenant. How many of the tenant's jobs are not erased yet.
SELECT count(*) FROM extraction_jobs j
WHERE j.tenant_id = $1
  AND NOT EXISTS (SELECT 1 FROM job_erasures e WHERE e.job_id = j.id AND e.tenant_id = $1);

-- name: job_select_erasable
-- $1 tenant, $2 limit. The tenant's jobs not erased yet, oldest first.
SELECT j.id FROM extraction_jobs j
WHERE j.tenant_id = $1
  AND NOT EXISTS (SELECT 1 FROM job_erasures e WHERE e.job_id = j.id AND e.tenant_id = $1)
ORDER BY j.created_at, j.id
LIMIT $2;
