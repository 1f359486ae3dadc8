-- name: supplier_upsert
-- Keyed by (tenant, VAT id): a second add for the same VAT id replaces the name, the
-- tax number and the IBANs on file. ``created`` is false for such an update. A tax
-- number another supplier of the tenant holds violates its unique key (refused).
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, vat_id) DO UPDATE
  SET name = EXCLUDED.name, ibans = EXCLUDED.ibans, tax_number = EXCLUDED.tax_number
RETURNING id, (xmax = 0) AS created;

-- name: supplier_upsert_by_tax_number
-- A supplier without VAT id (migration 041), keyed by (tenant, tax number): a second
-- add for the same tax number replaces the name and the IBANs on file (a VAT id the
-- stored supplier has stays). ``created`` is false for such an update.
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number)
VALUES ($1, $2, $3, NULL, $4, $5)
ON CONFLICT (tenant_id, tax_number) DO UPDATE SET name = EXCLUDED.name, ibans = EXCLUDED.ibans
RETURNING id, (xmax = 0) AS created;

-- name: supplier_list_for_tenant
-- By name; suppliers of one name by VAT id, then tax number (NULLs last), so the order
-- is the same on every read.
SELECT name, vat_id, ibans, tax_number FROM suppliers WHERE tenant_id = $1
ORDER BY name, vat_id, tax_number;

-- name: tenant_currencies_update_if_exists
-- The tenant's permitted currencies (ISO 4217, checked by the caller).
UPDATE tenants SET allowed_currencies = $2 WHERE id = $1 RETURNING allowed_currencies;
