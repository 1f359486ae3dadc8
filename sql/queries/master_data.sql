-- name: supplier_upsert
-- Keyed by (tenant, VAT id): a second add for the same VAT id replaces the name
-- and the IBANs on file. ``created`` is false for such an update.
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, vat_id) DO UPDATE SET name = EXCLUDED.name, ibans = EXCLUDED.ibans
RETURNING id, (xmax = 0) AS created;

-- name: supplier_list_for_tenant
SELECT name, vat_id, ibans FROM suppliers WHERE tenant_id = $1 ORDER BY name;

-- name: tenant_currencies_update_if_exists
-- The tenant's permitted currencies (ISO 4217, checked by the caller).
UPDATE tenants SET allowed_currencies = $2 WHERE id = $1 RETURNING allowed_currencies;
