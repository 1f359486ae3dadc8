-- name: supplier_upsert
-- Keyed by (tenant, VAT id): a second add for the same VAT id replaces the name, the
-- tax number and the IBANs on file. ``created`` is false for such an update. A tax
-- number another supplier of the tenant holds violates its unique key (refused).
-- $5: the IBANs as stored (sealed with a KEK), $7: their keyed hashes (migration 044).
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number, iban_keys)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, vat_id) DO UPDATE
  SET name = EXCLUDED.name, ibans = EXCLUDED.ibans, tax_number = EXCLUDED.tax_number,
      iban_keys = EXCLUDED.iban_keys
RETURNING id, (xmax = 0) AS created;

-- name: supplier_upsert_by_tax_number
-- A supplier without VAT id (migration 041), keyed by (tenant, tax number): a second
-- add for the same tax number replaces the name and the IBANs on file (a VAT id the
-- stored supplier has stays). ``created`` is false for such an update.
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number, iban_keys)
VALUES ($1, $2, $3, NULL, $4, $5, $6)
ON CONFLICT (tenant_id, tax_number) DO UPDATE
  SET name = EXCLUDED.name, ibans = EXCLUDED.ibans, iban_keys = EXCLUDED.iban_keys
RETURNING id, (xmax = 0) AS created;

-- name: supplier_list_for_tenant
-- By name; suppliers of one name by VAT id, then tax number (NULLs last), so the order
-- is the same on every read.
SELECT name, vat_id, ibans, tax_number FROM suppliers WHERE tenant_id = $1
ORDER BY name, vat_id, tax_number;

-- name: supplier_list_unsealed
-- Suppliers with an IBAN stored unsealed (before migration 044, or written without a
-- KEK), for ``seal_register``; $1 at most.
SELECT id, tenant_id, ibans FROM suppliers
WHERE EXISTS (SELECT 1 FROM unnest(ibans) AS i WHERE i NOT LIKE 'fenceline-sealed:v1:%')
ORDER BY id
LIMIT $1;

-- name: supplier_ibans_update_if_same
-- A supplier's IBANs sealed ($3) with their keyed hashes ($4), if they are still the
-- ones read ($2): a supplier added again meanwhile keeps what its writer stored.
UPDATE suppliers SET ibans = $3, iban_keys = $4
WHERE id = $1 AND ibans = $2
RETURNING id;

-- name: tenant_currencies_update_if_exists
-- The tenant's permitted currencies (ISO 4217, checked by the caller).
UPDATE tenants SET allowed_currencies = $2 WHERE id = $1 RETURNING allowed_currencies;
