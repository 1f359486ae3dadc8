-- Console sessions live in the database (issue 45, defect 5). A signed cookie that
-- named the key stayed valid after logout until it expired (8 hours): nothing on
-- the server could end it. Now the cookie carries only a random session id; this
-- table holds the id's sha256 (never the id), so a database read does not yield a
-- usable cookie. Logout deletes the row, revoking a key deletes its key's rows in
-- the revoking transaction, and a row past expires_at is refused.
CREATE TABLE console_sessions (
  id_hash    text PRIMARY KEY,               -- sha256 hex of the cookie's session id
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  key_id     uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  CONSTRAINT console_sessions_expire_after_creation CHECK (expires_at > created_at)
);

-- A key's sessions: what revocation deletes and a sign-in purges when expired.
CREATE INDEX console_sessions_key ON console_sessions (key_id, expires_at);
