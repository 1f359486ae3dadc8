-- Reference ERP receiver (issue 47, item 2): credit notes.
--
-- A credit_note.created.v1 delivery is posted like an invoice, once per job, as a
-- credit: kind 'credit_note', and credits_job_id the job of the invoice it credits
-- (data.credited_invoice.job_id; NULL for a credit note that credits no invoice).
-- The receiver refuses a credit for an invoice this ledger never posted (409
-- credited_invoice_unknown), keeping nothing of that delivery.
ALTER TABLE erp_postings
  ADD COLUMN kind text NOT NULL DEFAULT 'invoice' CHECK (kind IN ('invoice', 'credit_note')),
  ADD COLUMN credits_job_id uuid;
CREATE INDEX erp_postings_credits ON erp_postings (ledger, credits_job_id)
  WHERE credits_job_id IS NOT NULL;
