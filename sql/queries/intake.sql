-- Intake: admission (quotas, system capacity) and tenant administration.
-- The job and document writes themselves are the job store's (jobs.sql).

-- name: tenant_admission_lock
-- Serialises admission per tenant until the accept transaction ends, so the
-- quota reads below and the job insert are one atomic decision. $1 namespace,
-- $2 tenant id. A hash collision between tenants only adds waiting.
SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text));

-- name: tenant_pending_usage
-- Unsettled work of one tenant: the quantities its quotas bound.
SELECT count(*) AS jobs,
       coalesce(sum(d.byte_size), 0)::bigint AS bytes,
       coalesce(sum(j.estimated_tokens), 0)::bigint AS tokens
FROM extraction_jobs j
LEFT JOIN documents d ON d.id = j.document_id
WHERE j.tenant_id = $1 AND j.state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED');

-- name: tenant_spend_get
-- Spend of the current budget period and the seconds until the next period.
-- $1 tenant, $2 'day' | 'month', $3 now (nullable).
WITH now_ AS (SELECT coalesce($3::timestamptz, now()) AS t),
period AS (SELECT date_trunc($2, t) AS start, t FROM now_)
SELECT coalesce((SELECT s.reserved + s.reconciled FROM tenant_spend s
                 WHERE s.tenant_id = $1 AND s.period_start = period.start), 0) AS spent,
       extract(epoch FROM (period.start + ('1 ' || $2)::interval) - period.t)
         AS seconds_to_next_period
FROM period;

-- name: tenant_spend_reserve
-- $1 tenant, $2 'day' | 'month', $3 now (nullable), $4 amount.
INSERT INTO tenant_spend (tenant_id, period_start, reserved, jobs)
VALUES ($1, date_trunc($2, coalesce($3::timestamptz, now())), $4, 1)
ON CONFLICT (tenant_id, period_start) DO UPDATE
SET reserved = tenant_spend.reserved + EXCLUDED.reserved,
    jobs = tenant_spend.jobs + 1,
    updated_at = now()
RETURNING reserved;

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
SELECT id, key_prefix, scopes, created_at, revoked_at
FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id;
