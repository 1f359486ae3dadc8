-- Admission scope limits (issue 18): what each admission actor enforces.
--
-- The limits live in the actor's configuration (cluster/supervisor.py builds one
-- actor per scope); the intake API runs in other processes and on other nodes,
-- so it cannot ask the actor for them. Each actor writes its scope's limits here
-- when it starts (and Ray restarts it after a crash, so it writes them again), and
-- the operator dashboard reads them next to the tenant's own usage. One row per
-- scope, the latest writer wins; recorded_at says how fresh the row is.
--
-- tenant_in_flight holds per-tenant overrides keyed by tenant id: tenant-scoped
-- reads extract only the caller's own key, never the whole object.
CREATE TABLE admission_scopes (
  scope                  text PRIMARY KEY,
  rpm                    integer CHECK (rpm > 0),
  tpm                    integer CHECK (tpm > 0),
  max_in_flight          integer CHECK (max_in_flight > 0),
  max_concurrent_tokens  integer CHECK (max_concurrent_tokens > 0),
  tenant_max_in_flight   integer CHECK (tenant_max_in_flight > 0),
  tenant_in_flight       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(tenant_in_flight) = 'object'),
  window_seconds         double precision NOT NULL CHECK (window_seconds > 0),
  incarnation            text NOT NULL,
  recorded_at            timestamptz NOT NULL DEFAULT now()
);
