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
-- $6: seconds until the key expires (NULL: never); $7: now (NULL: the database's);
-- $8: the key's label (NULL: none).
INSERT INTO api_keys (id, tenant_id, key_hash, key_prefix, scopes, created_at, expires_at, label)
VALUES ($1, $2, $3, $4, $5, coalesce($7, now()),
        coalesce($7, now()) + make_interval(secs => $6::double precision), $8)
RETURNING id, tenant_id, key_prefix, scopes, created_at, expires_at, label;

-- name: api_key_lookup
-- Lookup by the sha256 of the presented key; the unique index makes this one
-- equality probe, and the hash comparison itself is not timing-sensitive.
-- $2: now (NULL: the database's), so tests can move past an expiry.
SELECT k.id, k.tenant_id, k.scopes, k.revoked_at, k.expires_at, t.name AS tenant_name,
       (k.expires_at IS NOT NULL AND k.expires_at <= coalesce($2, now())) AS expired
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = $1;

-- name: api_key_revoke_if_active
UPDATE api_keys SET revoked_at = now()
WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
RETURNING id;

-- name: api_key_expiry_get
SELECT expires_at FROM api_keys WHERE id = $1;

-- name: api_key_get_by_id
-- A console session names its key by id (the session never holds the secret);
-- every request reads the key again, so a revoked key ends its sessions at once.
-- $2: now (NULL: the database's); an expired key ends its sessions as a revoked one does.
SELECT k.id, k.tenant_id, k.scopes, k.revoked_at, k.expires_at, t.name AS tenant_name,
       (k.expires_at IS NOT NULL AND k.expires_at <= coalesce($2, now())) AS expired
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.id = $1;
