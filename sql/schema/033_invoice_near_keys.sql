-- Possible duplicate invoices (issue 47, item 5).
--
-- invoice_identities (migration 011) holds an invoice's exact identity: supplier,
-- number, gross total. A near duplicate escapes it: the same supplier and number
-- with another total, or the same supplier, total and issue date with a number
-- printed differently ("INV-0042" and "42"). Each result claims two near keys
-- here, in the transaction that commits it (pipeline/jobs/near_duplicates.py):
--
--   kind 'number'    supplier + invoice number
--   kind 'formatted' supplier + number without its formatting + gross total + issue date
--
-- A key is HMAC-SHA256 under a server secret over the tenant and those values, so
-- this table holds no invoice number, supplier or amount a reader could recover
-- without the secret. The primary key makes the first job to commit a key its
-- owner, as in invoice_identities: a concurrent insert of the same key waits for
-- the other transaction and then conflicts, so of two near duplicates racing one
-- is settled REVIEW_REQUIRED possible_duplicate naming the other.
CREATE TABLE invoice_near_keys (
  tenant_id   uuid NOT NULL REFERENCES tenants(id),
  kind        text NOT NULL CHECK (kind IN ('number', 'formatted')),
  key_hash    bytea NOT NULL CHECK (length(key_hash) = 32),
  job_id      uuid NOT NULL REFERENCES extraction_jobs(id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, kind, key_hash)
);
CREATE INDEX invoice_near_keys_job ON invoice_near_keys (job_id);

-- The secret the near keys are computed under when no FENCELINE_DUPLICATE_KEY_SECRET
-- (nor FENCELINE_WEBHOOK_SECRET_KEY to derive it from) is configured: development
-- only, since a secret kept beside the hashes protects them from nobody who reads
-- the database. 32 bytes from two gen_random_uuid() (a strong random source).
CREATE TABLE server_secrets (
  name        text PRIMARY KEY CHECK (name IN ('invoice_near_keys')),
  secret      bytea NOT NULL CHECK (length(secret) = 32),
  created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO server_secrets (name, secret)
VALUES ('invoice_near_keys', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
