-- Intake API (issue 3): admission ledger, review audit trail, and the indexes the
-- tenant-scoped reads and quota checks need.

-- Spend reserved at acceptance, per tenant and budget period. Only the acceptance
-- transaction writes it, under the tenant's advisory admission lock, so the check
-- "reserved + this job's estimate <= spend_budget" and the reservation are atomic.
-- Reconciliation against reported usage (the admission ledger of the cluster
-- runtime) adjusts `reconciled`; the budget check uses reserved + reconciled.
CREATE TABLE tenant_spend (
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  period_start  timestamptz NOT NULL,
  reserved      numeric(18, 6) NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  reconciled    numeric(18, 6) NOT NULL DEFAULT 0,
  jobs          integer NOT NULL DEFAULT 0 CHECK (jobs >= 0),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, period_start)
);

-- Every human review decision (REVIEW_REQUIRED -> SUCCEEDED | FAILED_TERMINAL),
-- written in the same transaction as the conditional state change.
CREATE TABLE review_decisions (
  id                   uuid PRIMARY KEY,
  job_id               uuid NOT NULL REFERENCES extraction_jobs(id),
  tenant_id            uuid NOT NULL REFERENCES tenants(id),
  api_key_id           uuid NOT NULL REFERENCES api_keys(id),
  decision             text NOT NULL CHECK (decision IN ('approve', 'reject')),
  note                 text NOT NULL,
  from_state_version   bigint NOT NULL,
  to_state             text NOT NULL CHECK (to_state IN ('SUCCEEDED', 'FAILED_TERMINAL')),
  to_state_version     bigint NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_decisions_job ON review_decisions (job_id, created_at);

-- Per-tenant pending work (quota check): index-only over the unsettled jobs.
CREATE INDEX extraction_jobs_tenant_pending ON extraction_jobs (tenant_id)
  INCLUDE (estimated_tokens, document_id)
  WHERE state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED');

-- Keyset pagination of a tenant's jobs, newest first, optionally by state.
CREATE INDEX extraction_jobs_tenant_page ON extraction_jobs (tenant_id, created_at DESC, id DESC);
CREATE INDEX extraction_jobs_tenant_state_page
  ON extraction_jobs (tenant_id, state, created_at DESC, id DESC);
