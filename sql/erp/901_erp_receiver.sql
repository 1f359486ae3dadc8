-- The reference ERP receiver's own tables (benchmarks/erp_receiver.py), apart from
-- the product's schema: the receiver applies sql/erp/ at start-up, and the test
-- fixtures that run it apply it to their template database. In a real deployment
-- these live in the ERP's own database; ledger names the books one receiver posts to.
--
-- Numbered 9xx so they never collide with the product's migrations in
-- schema_migrations. Until issue 15 they were part of 003_delivery.sql: a database
-- migrated before then already has them, and this file leaves it as it is.
DO $$
BEGIN
  IF to_regclass('erp_inbox') IS NULL THEN
    CREATE TABLE erp_inbox (
      ledger          text NOT NULL,
      delivery_id     text NOT NULL,              -- webhook-id: deduplication key
      payload_digest  text NOT NULL CHECK (payload_digest ~ '^[0-9a-f]{64}$'),
      event_type      text NOT NULL,
      job_id          uuid,                       -- no foreign key: the ERP has no job table
      received_at     timestamptz NOT NULL DEFAULT now(),
      duplicates      integer NOT NULL DEFAULT 0 CHECK (duplicates >= 0),
      conflicts       integer NOT NULL DEFAULT 0 CHECK (conflicts >= 0),
      PRIMARY KEY (ledger, delivery_id)
    );

    -- The "post invoice" operation: one row per job, persisted with the inbox row,
    -- applied once (posted_at) under its own idempotency guard.
    CREATE TABLE erp_postings (
      ledger           text NOT NULL,
      job_id           uuid NOT NULL,
      delivery_id      text NOT NULL,             -- the delivery that first carried the job
      invoice          jsonb NOT NULL,
      accepted_at      timestamptz NOT NULL DEFAULT now(),
      posted_at        timestamptz,
      effect_count     integer NOT NULL DEFAULT 0 CHECK (effect_count >= 0),
      deliveries_seen  integer NOT NULL DEFAULT 1 CHECK (deliveries_seen >= 1),
      PRIMARY KEY (ledger, job_id)
    );
    CREATE INDEX erp_postings_unposted ON erp_postings (ledger, accepted_at) WHERE posted_at IS NULL;
  END IF;
END
$$;
