-- The supplier register's names, VAT ids and tax numbers sealed at rest (issue 46):
-- a supplier's name and ids are lines of its invoices, and a sole trader's name is
-- personal data. With a KEK configured (FENCELINE_KEK / FENCELINE_KEK_FILE) name holds
-- the name sealed under the tenant's data key (fenceline-sealed:v1:...), vat_id and
-- tax_number hold keyed hashes of the ids ("<version>:<hex>", HMAC-SHA256 under a key
-- derived from that data key: pipeline/tenants/supplier_identities.py), so the unique
-- keys and the upserts' conflict targets still compare them by equality, and the ids
-- themselves are kept sealed in the columns added here. Without a KEK the columns
-- added here stay NULL and name, vat_id and tax_number hold the values as they are,
-- as every sealed value is written unsealed then. Rows written before this migration
-- read as they are; `fenceline suppliers seal` (or adding the supplier again) seals them.
ALTER TABLE suppliers
  ADD COLUMN vat_id_sealed text,
  ADD COLUMN tax_number_sealed text;
ALTER TABLE suppliers ADD CONSTRAINT suppliers_vat_id_sealed_keyed CHECK (
  vat_id_sealed IS NULL OR vat_id IS NOT NULL
);
ALTER TABLE suppliers ADD CONSTRAINT suppliers_tax_number_sealed_keyed CHECK (
  tax_number_sealed IS NULL OR tax_number IS NOT NULL
);
