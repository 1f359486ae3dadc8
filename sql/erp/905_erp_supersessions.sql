-- Reference ERP receiver (issue 47, item 1): invoice versions.
--
-- Fenceline sends invoice.superseded.v1 for a job whose invoice a later job
-- replaced, before that later job's extraction.completed.v1. The receiver records
-- the withdrawal here and marks the old job's posting superseded, releasing its
-- invoice key, so the new version posts instead of being refused as a duplicate.
CREATE TABLE erp_supersessions (
  ledger          text NOT NULL,
  job_id          uuid NOT NULL,               -- the superseded job
  superseded_by   uuid NOT NULL,
  version         integer NOT NULL CHECK (version >= 2),
  delivery_id     text NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (ledger, job_id)
);
ALTER TABLE erp_postings
  ADD COLUMN superseded_by uuid,
  ADD COLUMN superseded_at timestamptz;
