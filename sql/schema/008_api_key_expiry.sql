-- API keys may expire (issue 16): a key past expires_at is refused with 401
-- key_expired, like a revoked one but without an operator's action, so a
-- rotation can give the old key a deadline instead of relying on a revoke.
ALTER TABLE api_keys
  ADD COLUMN expires_at timestamptz,
  ADD CONSTRAINT api_keys_expire_after_creation CHECK (expires_at IS NULL OR expires_at > created_at);
