-- Per-tenant data keys (sql/schema/039_tenant_data_keys.sql; pipeline/data_keys.py).
-- wrapped is never returned unwrapped: the KEK is outside the database.

-- name: data_key_get_current
-- $1 tenant. The tenant's highest version (wrapped NULL: it was shredded, and the
-- next write creates the next version).
SELECT version, kek_id, wrapped FROM tenant_data_keys
WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1;

-- name: data_key_get
-- $1 tenant, $2 version. The key a sealed value names (wrapped NULL: shredded).
SELECT version, kek_id, wrapped, shredded_at FROM tenant_data_keys
WHERE tenant_id = $1 AND version = $2;

-- name: data_key_insert_if_new
-- $1 tenant, $2 version, $3 kek id, $4 wrapped key. No row when a concurrent writer
-- created this version first: the caller reads theirs (data_key_get).
INSERT INTO tenant_data_keys (tenant_id, version, kek_id, wrapped)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, version) DO NOTHING
RETURNING version;

-- name: data_key_list_to_rewrap
-- $1 the current KEK id, $2 batch size. Keys not shredded still wrapped under
-- another KEK (a rotation's work), a batch at a time.
SELECT tenant_id, version, kek_id, wrapped FROM tenant_data_keys
WHERE wrapped IS NOT NULL AND kek_id <> $1
ORDER BY tenant_id, version LIMIT $2;

-- name: data_key_rewrap_if_kek
-- $1 tenant, $2 version, $3 the KEK it was read under, $4 the new KEK id, $5 the
-- re-wrapped key. Conditional on the KEK read and on the key not being shredded
-- meanwhile: zero rows means another writer got there first (the caller checks).
UPDATE tenant_data_keys SET kek_id = $4, wrapped = $5, rewrapped_at = now()
WHERE tenant_id = $1 AND version = $2 AND kek_id = $3 AND wrapped IS NOT NULL
RETURNING version;

-- name: data_key_shred_for_tenant
-- $1 tenant, $2 now (nullable). Destroys every data key of the tenant not shredded
-- yet; returns the versions shredded now.
UPDATE tenant_data_keys SET wrapped = NULL, shredded_at = coalesce($2::timestamptz, now())
WHERE tenant_id = $1 AND wrapped IS NOT NULL
RETURNING version;

-- name: data_key_list_for_tenant
-- $1 tenant. Its keys without the wrapped bytes (fenceline keys show).
SELECT version, kek_id, created_at, rewrapped_at, shredded_at FROM tenant_data_keys
WHERE tenant_id = $1 ORDER BY version;
