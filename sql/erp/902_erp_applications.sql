-- Reference ERP receiver (issue 8): make a double posting observable.
--
-- erp_postings.effect_count is guarded by posted_at, so it can never exceed 1 and
-- an "exactly one effect per job" check on it proves nothing about deduplication.
-- The posting step now runs once per *delivery* that passed the inbox
-- deduplication (erp_inbox.applied_at is that delivery's guard), and every run
-- counts in erp_postings.applications before the job-level guard decides whether
-- it posts. Without the job guard each application would have been an effect, so
-- applications > 1 means the same job reached the ERP under more than one
-- delivery id (a sender that re-sent it as a new delivery, or a broken inbox);
-- duplicates of one delivery id never count.
--
-- Until issue 15 this was the product's 007_erp_applications.sql; a database
-- migrated before then already has the column, and this file leaves it as it is.
DO $$
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'erp_inbox'
      AND column_name = 'applied_at'
  ) THEN
    ALTER TABLE erp_inbox ADD COLUMN applied_at timestamptz;
    ALTER TABLE erp_postings
      ADD COLUMN applications integer NOT NULL DEFAULT 0 CHECK (applications >= 0);

    -- Rows written before this migration: a posted job's deliveries all ran the step.
    UPDATE erp_inbox i SET applied_at = p.posted_at
    FROM erp_postings p
    WHERE p.ledger = i.ledger AND p.job_id = i.job_id AND p.posted_at IS NOT NULL;
    UPDATE erp_postings SET applications = deliveries_seen WHERE posted_at IS NOT NULL;

    -- Start-up recovery finds deliveries accepted but not yet applied (a crash
    -- between the inbox commit and the posting step).
    CREATE INDEX erp_inbox_unapplied ON erp_inbox (ledger, received_at)
      WHERE applied_at IS NULL AND job_id IS NOT NULL;
    -- It replaces the scan of unposted postings.
    DROP INDEX erp_postings_unposted;
  END IF;
END
$$;
