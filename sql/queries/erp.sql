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
SELECT delivery_id, payload_digest, event_type, job_id, received_at, applied_at, duplicates,
       conflicts
FROM erp_inbox WHERE ledger = $1 ORDER BY received_at, delivery_id;

-- name: erp_posting_insert_if_new
-- Persisted in the inbox transaction. A second delivery of the same job (another
-- delivery id) only counts as seen: one posting per job.
-- $5 the invoice key: another job's posting of the same supplier invoice makes
-- this insert fail on erp_postings_invoice_key (the receiver answers 409).
INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice, invoice_key)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (ledger, job_id) DO UPDATE SET deliveries_seen = erp_postings.deliveries_seen + 1
RETURNING (xmax = 0) AS inserted;

-- name: erp_credit_note_posting_insert_if_new
-- erp_posting_insert_if_new for a credit_note.created.v1: the posting is a credit
-- ($6 the job of the invoice it credits, NULL: none), keyed apart from invoices.
INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice, invoice_key, kind,
                          credits_job_id)
VALUES ($1, $2, $3, $4, $5, 'credit_note', $6)
ON CONFLICT (ledger, job_id) DO UPDATE SET deliveries_seen = erp_postings.deliveries_seen + 1
RETURNING (xmax = 0) AS inserted;

-- name: erp_inbox_mark_applied_if_unapplied
-- The posting step runs once per accepted delivery: a duplicate of the same
-- delivery id finds applied_at set and does nothing.
UPDATE erp_inbox SET applied_at = now()
WHERE ledger = $1 AND delivery_id = $2 AND applied_at IS NULL AND job_id IS NOT NULL
RETURNING job_id;

-- name: erp_inbox_list_unapplied
-- Start-up recovery: deliveries committed to the inbox whose posting step never ran.
SELECT delivery_id FROM erp_inbox
WHERE ledger = $1 AND applied_at IS NULL AND job_id IS NOT NULL
ORDER BY received_at, delivery_id
LIMIT $2;

-- name: erp_posting_count_application
-- Every run of the posting step counts, before the job guard below decides: each
-- one would have been an effect without it, so more than one is a double posting
-- that only the job guard absorbed.
UPDATE erp_postings SET applications = applications + 1
WHERE ledger = $1 AND job_id = $2
RETURNING applications;

-- name: erp_posting_apply_if_unposted
-- The side effect, guarded by the job: only the first application posts.
UPDATE erp_postings
SET posted_at = now(), effect_count = effect_count + 1
WHERE ledger = $1 AND job_id = $2 AND posted_at IS NULL
RETURNING job_id;

-- name: erp_posting_list
SELECT job_id, delivery_id, invoice, accepted_at, posted_at, effect_count, applications,
       deliveries_seen, kind, credits_job_id
FROM erp_postings WHERE ledger = $1 ORDER BY accepted_at, job_id;

-- name: erp_posting_owner_of_invoice
SELECT job_id, delivery_id, posted_at FROM erp_postings
WHERE ledger = $1 AND invoice_key = $2;

-- name: erp_posting_invoice_posted
-- A credit note's invoice: posted in this ledger, as an invoice.
SELECT job_id FROM erp_postings
WHERE ledger = $1 AND job_id = $2 AND kind = 'invoice' AND posted_at IS NOT NULL;

-- name: erp_supersession_insert_if_new
-- invoice.superseded.v1, in the inbox transaction: the old job ($2) is withdrawn in
-- favour of $3. One row per superseded job.
INSERT INTO erp_supersessions (ledger, job_id, superseded_by, version, delivery_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (ledger, job_id) DO NOTHING
RETURNING job_id;

-- name: erp_posting_supersede_if_current
-- The old job's posting is superseded and gives up its invoice key, so the new
-- version of the invoice may post. No row: the old job never posted here.
UPDATE erp_postings SET superseded_by = $3, superseded_at = now(), invoice_key = NULL
WHERE ledger = $1 AND job_id = $2 AND superseded_by IS NULL
RETURNING job_id;

-- name: erp_supersession_list
SELECT job_id, superseded_by, version, delivery_id, received_at
FROM erp_supersessions WHERE ledger = $1 ORDER BY received_at, job_id;

-- name: erp_posting_totals
-- The demo's report, on the ERP's database: postings, and those a second delivery
-- reached (absorbed by the receiver's inbox).
SELECT count(*) AS postings, count(*) FILTER (WHERE deliveries_seen > 1) AS duplicates_absorbed
FROM erp_postings;

-- name: erp_posting_applications_by_job
-- The demo's per-invoice table, on the ERP's database: applications counts every run
-- of the posting step, so a job that reached the ERP under two delivery ids shows 2.
SELECT job_id, sum(applications)::int AS applications,
       bool_or(posted_at IS NOT NULL) AS posted
FROM erp_postings GROUP BY job_id;
