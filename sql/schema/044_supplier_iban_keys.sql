-- The supplier register's IBANs sealed at rest (issue 46): with a KEK configured
-- (FENCELINE_KEK / FENCELINE_KEK_FILE) each element of suppliers.ibans is a sealed
-- value (fenceline-sealed:v1:...) under the tenant's data key, and iban_keys holds,
-- at the same positions, a keyed hash of each IBAN (HMAC-SHA256 under a key derived
-- from that data key, "<version>:<hex>") for equality lookups, so neither the table
-- nor an index holds an IBAN in clear. Without a KEK the IBANs are stored as they
-- are and iban_keys is empty, as every sealed value is written unsealed then.
-- Rows written before this migration keep their IBANs as they are and read as they
-- are; `fenceline suppliers seal` (or adding the supplier again) seals them.
ALTER TABLE suppliers ADD COLUMN iban_keys text[] NOT NULL DEFAULT ARRAY[]::text[];
ALTER TABLE suppliers ADD CONSTRAINT suppliers_iban_keys_aligned CHECK (
  cardinality(iban_keys) = 0 OR cardinality(iban_keys) = cardinality(ibans)
);
