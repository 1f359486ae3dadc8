-- name: migration_lock
SELECT pg_advisory_xact_lock($1);

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_list
SELECT version, name, applied_at FROM schema_migrations ORDER BY version;

-- name: migration_record
INSERT INTO schema_migrations (version, name) VALUES ($1, $2);

-- name: database_exists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1);

-- name: server_maintenance_settings
-- What keeps the planner's statistics fresh and dead rows few (database.server_warnings).
SELECT current_setting('autovacuum')::boolean AS autovacuum,
       current_setting('track_counts')::boolean AS track_counts;
