-- Reference ERP receiver (issue 20): one posting per supplier invoice, not only per job.
--
-- The same supplier invoice extracted by two jobs (resubmitted under a new
-- idempotency key) arrives as two jobs with two delivery ids; deduplication by
-- delivery id and by job lets both post. invoice_key is the invoice's identity
-- (supplier, number, gross total: pipeline.identity.InvoiceIdentity) and is
-- unique per ledger, so the second job's posting is refused with its own answer
-- (409 "duplicate_invoice" naming the job that posted), which the sender records.
ALTER TABLE erp_postings ADD COLUMN invoice_key text;
CREATE UNIQUE INDEX erp_postings_invoice_key ON erp_postings (ledger, invoice_key)
  WHERE invoice_key IS NOT NULL;
