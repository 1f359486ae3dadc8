-- Duplicate-invoice protection (issue 20, item 4).
--
-- One row per supplier invoice a tenant's jobs produced a result for, written in
-- the transaction that commits the result. The primary key is the invoice's
-- identity (pipeline.identity.InvoiceIdentity: supplier, invoice number, gross
-- total with currency); the job that committed it first owns it. A later job
-- with the same identity finds the row, is sent to REVIEW_REQUIRED with the
-- reason duplicate_invoice naming the owner, and never creates an ERP delivery.
CREATE TABLE invoice_identities (
  tenant_id       uuid NOT NULL REFERENCES tenants(id),
  supplier        text NOT NULL CHECK (length(supplier) BETWEEN 1 AND 400),
  invoice_number  text NOT NULL CHECK (length(invoice_number) BETWEEN 1 AND 200),
  gross_total     text NOT NULL,
  job_id          uuid NOT NULL UNIQUE REFERENCES extraction_jobs(id),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, supplier, invoice_number, gross_total)
);
