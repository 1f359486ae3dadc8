-- Invoice versions (issue 47, item 1).
--
-- An invoice is identified by its tenant, supplier, number and document type; a
-- later document with the same identity is a new *version* of it. One row per
-- version a job committed: version 1 when the identity is first seen, version n+1
-- when a job supersedes the current one (pipeline/jobs/versions.py). The current
-- version is the row not superseded; a partial unique index keeps it one per
-- identity, and the supersede is one conditional statement on the current row's
-- version and job (optimistic concurrency): of two versions racing, the second
-- finds the row superseded, matches nothing, and decides again against the winner.
--
-- key_hash is HMAC-SHA256 under the near keys' secret (migration 033) over the
-- tenant, supplier, number and document type: no invoice number in clear.
-- document_type is 'invoice' until credit notes and corrective invoices are told
-- apart. issue_date is what the version rule compares (a newer date is a possible
-- amendment).
CREATE TABLE invoice_versions (
  tenant_id      uuid NOT NULL REFERENCES tenants(id),
  document_type  text NOT NULL DEFAULT 'invoice' CHECK (document_type ~ '^[a-z_]{1,40}$'),
  key_hash       bytea NOT NULL CHECK (length(key_hash) = 32),
  version        integer NOT NULL CHECK (version >= 1),
  job_id         uuid NOT NULL UNIQUE REFERENCES extraction_jobs(id),
  issue_date     date,
  supersedes     uuid REFERENCES extraction_jobs(id),
  superseded_by  uuid REFERENCES extraction_jobs(id),
  superseded_at  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, document_type, key_hash, version),
  CONSTRAINT superseded_at_exactly_when_superseded CHECK (
    (superseded_by IS NULL) = (superseded_at IS NULL)),
  CONSTRAINT supersedes_from_version_two CHECK ((supersedes IS NULL) OR version > 1)
);
CREATE UNIQUE INDEX invoice_versions_current ON invoice_versions (tenant_id, document_type, key_hash)
  WHERE superseded_by IS NULL;

-- What a tenant does with a possible amendment: 'review' holds it for a reviewer
-- (REVIEW_REQUIRED possible_amendment), 'auto_supersede' supersedes at once.
ALTER TABLE tenants ADD COLUMN invoice_version_policy text NOT NULL DEFAULT 'review'
  CHECK (invoice_version_policy IN ('review', 'auto_supersede'));

-- A delivery that must wait for another to be delivered first: a new version's
-- extraction.completed.v1 waits for the invoice.superseded.v1 of the version it
-- replaces, at the same endpoint, so the ERP sees them in that order.
ALTER TABLE deliveries ADD COLUMN after_id uuid REFERENCES deliveries(id);
CREATE INDEX deliveries_after ON deliveries (after_id) WHERE after_id IS NOT NULL;
