-- Encryption at rest (issue 46, item 3): per-tenant data keys, stored wrapped.
--
-- A tenant's invoice text is sealed (AES-256-GCM) under one of its data keys
-- (pipeline/envelope.py, pipeline/data_keys.py). A data key is 32 random bytes that
-- never reach this table in the clear: wrapped holds nonce + AES-GCM of the key
-- under the key-encryption key (KEK) kek_id names, which lives outside the database
-- (FENCELINE_KEK, a key file, or a KMS), with the tenant and version as associated
-- data. A sealed value names the version it was sealed under
-- ('fenceline-sealed:v1:<version>:<base64>'), so:
--
--   * a KEK rotation (fenceline keys rotate) re-wraps these rows under the new KEK and
--     rewrites no sealed value;
--   * crypto-shredding sets wrapped to NULL (shredded_at says when): every value
--     sealed under that version is unreadable at once, in this database, its
--     replicas and its backups, and reads say "shredded". The row stays, so a read
--     can tell a shredded key from a missing one. The tenant's next write creates
--     the next version.
--
-- The current data key of a tenant is its highest version.
CREATE TABLE tenant_data_keys (
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  version       integer NOT NULL CHECK (version > 0),
  kek_id        text NOT NULL CHECK (length(kek_id) BETWEEN 1 AND 200),
  wrapped       bytea CHECK (length(wrapped) BETWEEN 28 AND 4096),
  created_at    timestamptz NOT NULL DEFAULT now(),
  rewrapped_at  timestamptz,
  shredded_at   timestamptz,
  PRIMARY KEY (tenant_id, version),
  CHECK ((wrapped IS NULL) = (shredded_at IS NOT NULL))
);
-- A rotation's scan for the rows still wrapped under another KEK.
CREATE INDEX tenant_data_keys_kek ON tenant_data_keys (kek_id) WHERE wrapped IS NOT NULL;

-- The exact-duplicate identity (migration 011) keeps keyed hashes from here on, as the
-- near keys of migration 033 do: supplier, invoice_number and gross_total each hold
-- the hex HMAC-SHA256, under the same server secret, of the part's name, the tenant
-- and its value (pipeline/jobs/duplicates.py, keyed_identity). Equal identities still
-- meet in the primary key; no invoice number, supplier or amount sits in it in the
-- clear. Rows written before this migration keep their plaintext (NOT VALID: the
-- secret is not in the database to hash them with) until retention or erasure removes
-- them; a resubmission of such an invoice is not found by the exact check.
ALTER TABLE invoice_identities ADD CONSTRAINT invoice_identities_keyed CHECK (
  supplier ~ '^[0-9a-f]{64}$' AND invoice_number ~ '^[0-9a-f]{64}$'
  AND gross_total ~ '^[0-9a-f]{64}$'
) NOT VALID;
