-- name: supplier_upsert
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, vat_id) DO UPDATE SET name = EXCLUDED.name, ibans = EXCLUDED.ibans
RETURNING id;

-- name: supplier_list_for_tenant
SELECT name, vat_id, ibans FROM suppliers WHERE tenant_id = $1 ORDER BY name;
