-- Intake: admission (quotas, system capacity) and tenant administration.
-- The job and document writes themselves are the job store's (jobs.sql).

-- name: tenant_admission_lock
-- Serialises admission per tenant until the accept transaction ends, so the
-- quota reads below and the job insert are one atomic decision. $1 namespace,
-- $2 tenant id. A hash collision between tenants only adds waiting.
SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text));

-- name: tenant_admission_get
-- One read for every quota of one tenant: its limits, its unsettled work
-- (READY, RUNNING, RETRY_SCHEDULED: tenant_backlog's running totals, kept by
-- triggers in each change's transaction) and the spend of the current budget period,
-- with the seconds until the next period.
-- With $4, an idempotency key, the same round trip also reads the job that key
-- already names (job_id NULL when the key is new, or when $4 is NULL) with its
-- state as accepted: the accept transaction runs it after tenant_admission_lock
-- and answers a known key from it. $1 tenant, $2 'day' | 'month', $3 now (NULL:
-- now()), $4 idempotency key or NULL.
-- With $5, the caller's API key id, key_state says whether that key is still
-- 'active' (else 'revoked' or 'expired'; a deleted key reads 'revoked'); NULL when
-- $5 is NULL. The accept transaction refuses a key that is no longer active, in
-- this read it runs anyway, so a key answered from the intake's cache
-- (pipeline/api/key_cache.py) cannot get a job accepted after its revoke committed.
WITH period AS (
  SELECT date_trunc($2, coalesce($3::timestamptz, now())) AS start,
         coalesce($3::timestamptz, now()) AS t
)
SELECT t.max_pending_jobs, t.max_pending_bytes, t.max_pending_tokens, t.spend_budget,
       u.jobs, u.bytes, u.tokens,
       coalesce(s.reserved + s.reconciled, 0) AS spent,
       extract(epoch FROM (period.start + ('1 ' || $2)::interval) - period.t)
         AS seconds_to_next_period,
       k.job_id, k.request_hash, k.deadline_at, k.document_id,
       k.accepted_state, k.accepted_state_version,
       CASE WHEN $5::uuid IS NULL THEN NULL ELSE coalesce((
         SELECT CASE WHEN ak.revoked_at IS NOT NULL THEN 'revoked'
                     WHEN ak.expires_at IS NOT NULL AND ak.expires_at <= period.t THEN 'expired'
                     ELSE 'active' END
         FROM api_keys ak WHERE ak.id = $5 AND ak.tenant_id = t.id), 'revoked')
       END AS key_state
FROM tenants t
CROSS JOIN period
CROSS JOIN LATERAL (
  -- The running totals of migration 017 (one row per shard), not a sum over jobs.
  SELECT coalesce(sum(b.jobs), 0)::bigint AS jobs,
         coalesce(sum(b.bytes), 0)::bigint AS bytes,
         coalesce(sum(b.tokens), 0)::bigint AS tokens
  FROM tenant_backlog b
  WHERE b.tenant_id = t.id
) u
LEFT JOIN tenant_spend s ON s.tenant_id = t.id AND s.period_start = period.start
LEFT JOIN LATERAL (
  SELECT j.id AS job_id, j.request_hash, j.deadline_at, j.document_id,
         coalesce(a.to_state, j.state) AS accepted_state,
         coalesce(a.state_version, j.state_version) AS accepted_state_version
  FROM extraction_jobs j
  LEFT JOIN LATERAL (
    SELECT e.to_state, e.state_version FROM job_events e
    WHERE e.job_id = j.id AND e.from_state IS NULL
    ORDER BY e.seq LIMIT 1
  ) a ON true
  WHERE j.tenant_id = t.id AND j.idempotency_key = $4
) k ON true
WHERE t.id = $1;

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
SELECT id, key_prefix, scopes, created_at, revoked_at, expires_at
FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id;
