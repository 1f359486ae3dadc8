-- Spend reconciliation (issue 20, item 5).
--
-- tenant_spend.reserved is the spend held for work not yet settled and
-- tenant_spend.reconciled the spend the attempts reported; admission checks
-- reserved + reconciled against the budget. Two ledgers make both exact:
--
-- * spend_reservations: one row per reservation (acceptance, and again per
--   re-drive), written in the transaction that admits the job. The maintenance
--   actor releases it (released_at) once the job settles, in the statement that
--   takes its amount off tenant_spend.reserved, so a failed job or one cheaper
--   than its estimate holds nothing afterwards.
-- * spend_charges: one row per attempt whose usage is known, written in the
--   statement that adds its amount to tenant_spend.reconciled. The primary key
--   makes a charge happen once, whoever runs the reconciler and how often.
CREATE TABLE spend_reservations (
  id            uuid PRIMARY KEY,
  job_id        uuid NOT NULL REFERENCES extraction_jobs(id),
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  period_start  timestamptz NOT NULL,
  amount        numeric(18, 6) NOT NULL CHECK (amount >= 0),
  created_at    timestamptz NOT NULL DEFAULT now(),
  released_at   timestamptz,
  FOREIGN KEY (tenant_id, period_start) REFERENCES tenant_spend (tenant_id, period_start)
);
-- A job holds at most one open reservation (a re-drive follows a settlement).
CREATE UNIQUE INDEX spend_reservations_open_job ON spend_reservations (job_id)
  WHERE released_at IS NULL;
CREATE INDEX spend_reservations_tenant ON spend_reservations (tenant_id, created_at);

CREATE TABLE spend_charges (
  job_id        uuid NOT NULL,
  fence         bigint NOT NULL,
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  period_start  timestamptz NOT NULL,
  tokens        integer NOT NULL CHECK (tokens >= 0),
  amount        numeric(18, 6) NOT NULL CHECK (amount >= 0),
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, fence),
  FOREIGN KEY (job_id, fence) REFERENCES job_attempts (job_id, fence)
);
CREATE INDEX spend_charges_tenant ON spend_charges (tenant_id, period_start);

-- The reconciler's scan: ended attempts, by the time they ended.
CREATE INDEX job_attempts_ended ON job_attempts (ended_at) WHERE outcome <> 'running';
