-- name: tenant_insert
INSERT INTO tenants (id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
                     max_pending_tokens, spend_budget, allowed_currencies)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
          max_pending_tokens, spend_budget, allowed_currencies, created_at;

-- name: tenant_get
SELECT id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
       max_pending_tokens, spend_budget, allowed_currencies, created_at
FROM tenants WHERE id = $1;

-- name: tenant_get_by_name
SELECT id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
       max_pending_tokens, spend_budget, allowed_currencies, created_at
FROM tenants WHERE name = $1;

-- name: tenant_list
SELECT id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
       max_pending_tokens, spend_budget, allowed_currencies, created_at
FROM tenants ORDER BY name;

-- name: api_key_insert
INSERT INTO api_keys (id, tenant_id, key_hash, key_prefix, scopes)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, tenant_id, key_prefix, scopes, created_at;

-- name: api_key_lookup
-- Lookup by the sha256 of the presented key; the unique index makes this one
-- equality probe, and the hash comparison itself is not timing-sensitive.
SELECT k.id, k.tenant_id, k.scopes, k.revoked_at, t.name AS tenant_name
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = $1;

-- name: api_key_revoke_if_active
UPDATE api_keys SET revoked_at = now()
WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
RETURNING id;

-- name: api_key_get_by_id
-- A console session names its key by id (the session never holds the secret);
-- every request reads the key again, so a revoked key ends its sessions at once.
SELECT k.id, k.tenant_id, k.scopes, k.revoked_at, t.name AS tenant_name
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.id = $1;
