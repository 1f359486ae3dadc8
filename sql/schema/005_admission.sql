-- Admission ledger (issue 6): one row per grant of the cluster admission actor.
--
-- The actor's sliding windows live in memory; this table is the durable record
-- that makes them honest across restarts and makes cost reportable:
--   * an uncertain attempt (timeout, expiry of a crashed holder) stays charged at
--     its full reservation, and a restarted actor replays the last window from here;
--   * charged_tokens is what the scope's TPM counted after reconciliation, and the
--     reported prompt/completion/cached tokens are what the provider says it used.
-- Rows move once, from 'granted' to a settled outcome, by a guarded UPDATE.
CREATE TABLE admission_grants (
  id                 uuid PRIMARY KEY,
  scope              text NOT NULL,             -- provider project or engine pool
  tenant_id          uuid NOT NULL REFERENCES tenants(id),
  job_id             uuid REFERENCES extraction_jobs(id),
  fence              bigint,
  priority_class     text NOT NULL CHECK (priority_class IN ('interactive', 'standard', 'batch')),
  reserved_tokens    integer NOT NULL CHECK (reserved_tokens >= 0),
  prompt_tokens      integer CHECK (prompt_tokens >= 0),
  completion_tokens  integer CHECK (completion_tokens >= 0),
  cached_tokens      integer CHECK (cached_tokens >= 0),
  charged_tokens     integer CHECK (charged_tokens >= 0),
  request_charged    boolean NOT NULL DEFAULT true,  -- false only when the call was never attempted
  outcome            text NOT NULL DEFAULT 'granted'
                       CHECK (outcome IN ('granted', 'reconciled', 'uncertain', 'refunded')),
  settled_by         text CHECK (settled_by IN ('driver', 'expiry')),
  granted_at         timestamptz NOT NULL,
  settled_at         timestamptz,
  CHECK ((outcome = 'granted') = (settled_at IS NULL)),
  CHECK ((outcome = 'granted') = (charged_tokens IS NULL)),
  CHECK ((outcome = 'granted') = (settled_by IS NULL)),
  CHECK (outcome <> 'uncertain' OR charged_tokens >= reserved_tokens)
);

-- Window replay and expiry per scope; open grants separately (they are few).
CREATE INDEX admission_grants_scope_time ON admission_grants (scope, granted_at);
CREATE INDEX admission_grants_open ON admission_grants (scope, granted_at) WHERE outcome = 'granted';
-- Tenant reports and the attempts of one job (explain).
CREATE INDEX admission_grants_tenant_time ON admission_grants (tenant_id, granted_at);
CREATE INDEX admission_grants_job ON admission_grants (job_id, fence) WHERE job_id IS NOT NULL;
