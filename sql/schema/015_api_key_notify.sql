-- API-key change notifications (issue 21, item 1: the intake's key cache).
--
-- The intake caches verified API keys (pipeline/api/key_cache.py). Whatever
-- changes a key — a revoke, a scope change, an expiry moved, the row deleted —
-- notifies 'fenceline_api_keys' with the key's id in the same transaction, so
-- the notification is delivered exactly when the change commits (and never for a
-- change rolled back). A tenant renamed or deleted changes every principal made
-- from its keys: the payload '*' tells the caches to drop everything.
-- A trigger rather than a pg_notify next to each UPDATE: a statement added later
-- (or run by hand in psql) cannot forget it.
CREATE FUNCTION api_keys_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('fenceline_api_keys', OLD.id::text);
  RETURN NULL;
END $$;

CREATE TRIGGER api_keys_changed
  AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_notify_change();

CREATE FUNCTION tenants_notify_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('fenceline_api_keys', '*');
  RETURN NULL;
END $$;

CREATE TRIGGER tenants_key_principals_changed
  AFTER UPDATE OF name OR DELETE ON tenants
  FOR EACH ROW EXECUTE FUNCTION tenants_notify_key_change();
