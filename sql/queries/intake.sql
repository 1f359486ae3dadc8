-- Intake: admission (quotas, system capacity) and tenant administration.
-- The job and document writes themselves are the job store's (jobs.sql).

-- name: intake_accept
-- The whole acceptance in one statement, so one round trip and its own
-- transaction (function intake_accept, migrations 018 and 023): the tenant's admission
-- lock, the quota and idempotency read, the decision, and for an accepted job the
-- document, the job, its outbox event and its spend reservation. Nothing is
-- written unless outcome is 'accepted'. A known key is answered from the row
-- (outcome 'known_key'); a revoked or expired caller key ('key_inactive'), the
-- capacity refusal the caller passes in ($4, 'capacity') and the four quotas
-- ('quota_*') are refusals. $1 lock namespace, $2 'day' | 'month', $3 API key id
-- or NULL, $4 capacity refused, $5 spend to reserve, $6 reservation id, then
-- job_accept_if_new's 25 parameters as $7..$31 (migration 023).
SELECT * FROM intake_accept($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                            $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26,
                            $27, $28, $29, $30, $31);

-- name: tenant_admission_get
-- One read for every quota of one tenant: its limits, its unsettled work
-- (READY, RUNNING, RETRY_SCHEDULED: tenant_backlog's running totals, kept by
-- triggers in each change's transaction) and the spend of the current budget period,
-- with the seconds until the next period (function tenant_admission, migration 018).
-- With $4, an idempotency key, the same read names the job that key already
-- names (job_id NULL when the key is new, or when $4 is NULL) with its state as
-- accepted. With $5, the caller's API key id, key_state says whether that key is
-- still 'active' (else 'revoked' or 'expired'); NULL when $5 is NULL.
-- $1 tenant, $2 'day' | 'month', $3 now (NULL: now()), $4 idempotency key or NULL,
-- $5 API key id or NULL.
SELECT * FROM tenant_admission($1, $2, $3, $4, $5);

-- name: tenant_quotas_update_if_exists
-- Admin: change a tenant's admission limits; NULL keeps the current value.
UPDATE tenants
SET max_pending_jobs = coalesce($2, max_pending_jobs),
    max_pending_bytes = coalesce($3, max_pending_bytes),
    max_pending_tokens = coalesce($4, max_pending_tokens),
    spend_budget = coalesce($5, spend_budget),
    max_in_flight = coalesce($6, max_in_flight),
    weight = coalesce($7, weight)
WHERE id = $1
RETURNING id, name, weight, max_in_flight, max_pending_jobs, max_pending_bytes,
          max_pending_tokens, spend_budget, allowed_currencies, created_at;

-- name: api_key_list_for_tenant
SELECT id, key_prefix, label, scopes, created_at, revoked_at, expires_at
FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id;

-- name: document_exists_for_tenant
-- Whether tenant $1 has a document with SHA-256 $2 (the unique (tenant_id, sha256)
-- index): a reference into the document store's own upload area must name one of
-- the tenant's documents, so no tenant reads or probes what another stored.
SELECT EXISTS (SELECT 1 FROM documents WHERE tenant_id = $1 AND sha256 = $2);
