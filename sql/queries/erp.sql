-- Reference ERP receiver: durable inbox keyed on the delivery id, and the
-- idempotent "post invoice" operation keyed on the job.

-- name: erp_inbox_insert_if_new
INSERT INTO erp_inbox (ledger, delivery_id, payload_digest, event_type, job_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (ledger, delivery_id) DO NOTHING
RETURNING delivery_id;

-- name: erp_inbox_lock
SELECT delivery_id, payload_digest, job_id FROM erp_inbox
WHERE ledger = $1 AND delivery_id = $2
FOR UPDATE;

-- name: erp_inbox_count_duplicate
UPDATE erp_inbox SET duplicates = duplicates + 1
WHERE ledger = $1 AND delivery_id = $2
RETURNING duplicates;

-- name: erp_inbox_count_conflict
-- Same delivery id, different payload: rejected, and counted as an alert.
UPDATE erp_inbox SET conflicts = conflicts + 1
WHERE ledger = $1 AND delivery_id = $2
RETURNING conflicts;

-- name: erp_inbox_list
SELECT delivery_id, payload_digest, event_type, job_id, received_at, duplicates, conflicts
FROM erp_inbox WHERE ledger = $1 ORDER BY received_at, delivery_id;

-- name: erp_posting_insert_if_new
-- Persisted in the inbox transaction. A second delivery of the same job (another
-- delivery id) only counts as seen: one posting per job.
INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice)
VALUES ($1, $2, $3, $4)
ON CONFLICT (ledger, job_id) DO UPDATE SET deliveries_seen = erp_postings.deliveries_seen + 1
RETURNING (xmax = 0) AS inserted;

-- name: erp_posting_apply_if_unposted
-- The side effect, guarded: only the first application counts.
UPDATE erp_postings
SET posted_at = now(), effect_count = effect_count + 1
WHERE ledger = $1 AND job_id = $2 AND posted_at IS NULL
RETURNING job_id;

-- name: erp_posting_list_unposted
SELECT job_id FROM erp_postings
WHERE ledger = $1 AND posted_at IS NULL
ORDER BY accepted_at
LIMIT $2;

-- name: erp_posting_list
SELECT job_id, delivery_id, invoice, accepted_at, posted_at, effect_count, deliveries_seen
FROM erp_postings WHERE ledger = $1 ORDER BY accepted_at, job_id;
