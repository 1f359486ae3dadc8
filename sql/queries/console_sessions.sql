-- Console sessions (sql/schema/027_console_sessions.sql, pipeline/tenants/sessions.py).
-- A session is found by the sha256 of the id its cookie carries: the primary key
-- makes that one equality probe on a digest the caller cannot choose, so its timing
-- says nothing about any stored id.

-- name: console_session_insert_if_key_active
-- $1: id hash; $2: tenant; $3: key; $4: lifetime in seconds; $5: now (NULL: the
-- database's). Inserts nothing for a key revoked or expired meanwhile: FOR SHARE
-- waits for a revocation in flight, so a session is never made after its key's
-- revocation has deleted the key's sessions.
INSERT INTO console_sessions (id_hash, tenant_id, key_id, created_at, expires_at)
SELECT $1, k.tenant_id, k.id, coalesce($5, now()),
       coalesce($5, now()) + make_interval(secs => $4::double precision)
FROM api_keys k
WHERE k.id = $3 AND k.tenant_id = $2 AND k.revoked_at IS NULL
  AND (k.expires_at IS NULL OR k.expires_at > coalesce($5, now()))
FOR SHARE OF k
RETURNING expires_at;

-- name: console_session_lookup
-- The principal of a live session of an active key: an expired session, or one
-- whose key was revoked or has expired, is no row. $2: now (NULL: the database's).
SELECT k.id, k.tenant_id, k.scopes, t.name AS tenant_name, s.expires_at
FROM console_sessions s
JOIN api_keys k ON k.id = s.key_id AND k.tenant_id = s.tenant_id
JOIN tenants t ON t.id = k.tenant_id
WHERE s.id_hash = $1 AND s.expires_at > coalesce($2, now())
  AND k.revoked_at IS NULL
  AND (k.expires_at IS NULL OR k.expires_at > coalesce($2, now()));

-- name: console_session_delete_if_tenant
-- Logout: the session of this tenant, gone; no row when it already was.
DELETE FROM console_sessions WHERE id_hash = $1 AND tenant_id = $2
RETURNING key_id;

-- name: console_session_delete_for_key
-- Revoking a key ends its sessions (in the revoking transaction).
DELETE FROM console_sessions WHERE key_id = $1 AND tenant_id = $2;

-- name: console_session_delete_expired_for_key
-- A sign-in purges its key's expired sessions, so rows do not pile up.
DELETE FROM console_sessions
WHERE key_id = $1 AND tenant_id = $2 AND expires_at <= coalesce($3, now());
