-- Credit notes linked to the invoice they credit (issue 47, item 2; issue 44).
--
-- A credit note (contract v3 document_type 'credit_note', read from a UBL CreditNote or
-- a CII/UBL type code 381) names its preceding invoice (EN 16931 BG-3). In the
-- transaction that commits the credit note's result (pipeline/jobs/credit_notes.py) that
-- number is looked up among the tenant's delivered invoices by exact identity: the same
-- supplier (VAT id, else name) and invoice number in invoice_identities, a SUCCEEDED
-- job whose result is an invoice. One found: a row here, and the ERP's
-- credit_note.created.v1 names that job. None, or several: the credit note is settled
-- REVIEW_REQUIRED (credit_note_reference_unknown, credit_note_reference_ambiguous).
--
-- Only job ids: the reference number is the credit note's result (erasure scrubs it
-- there), so this table holds nothing of the document.
CREATE TABLE credit_note_links (
  job_id          uuid PRIMARY KEY REFERENCES extraction_jobs(id),
  tenant_id       uuid NOT NULL REFERENCES tenants(id),
  invoice_job_id  uuid NOT NULL REFERENCES extraction_jobs(id),
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (invoice_job_id <> job_id)
);
CREATE INDEX credit_note_links_invoice ON credit_note_links (invoice_job_id);
