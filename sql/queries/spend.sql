-- Tenant spend: reservations at admission, charges of reported usage, releases
-- of settled jobs' reservations (issue 20, item 5). tenant_spend itself is
-- created by spend_reserve_for_job in the admitting transaction.

-- name: spend_reserve_for_job
-- One statement (one round trip, function spend_reserve of migration 018): charge
-- the period's reserved total and record the job's reservation.
-- $1 id, $2 job, $3 tenant, $4 'day' | 'month', $5 now (nullable), $6 amount.
SELECT spend_reserve($1, $2, $3, $4, $5, $6) AS id;

-- name: spend_charge_attempts
-- Charge up to $3 ended attempts not yet charged, at $1 per 1,000 reported tokens
-- (prompt + completion), rounded up to 1e-6, into tenant_spend.reconciled of the
-- period ($2) the attempt ended in. An attempt the reaper closed (lease_expired)
-- is charged only once a late result reported its usage. ON CONFLICT makes a
-- concurrent pass charge nothing twice; `charged` and `periods` let the caller
-- check every charge reached tenant_spend.
WITH due AS (
  SELECT a.job_id, a.fence, j.tenant_id,
         date_trunc($2, coalesce(a.late_result_at, a.ended_at)) AS period_start,
         coalesce(a.prompt_tokens, 0) + coalesce(a.completion_tokens, 0) AS tokens
  FROM job_attempts a
  JOIN extraction_jobs j ON j.id = a.job_id
  WHERE a.outcome <> 'running'
    AND (a.outcome <> 'lease_expired' OR a.late_result_at IS NOT NULL)
    AND NOT EXISTS (SELECT 1 FROM spend_charges c WHERE c.job_id = a.job_id AND c.fence = a.fence)
  ORDER BY a.ended_at
  LIMIT $3
), charged AS (
  INSERT INTO spend_charges (job_id, fence, tenant_id, period_start, tokens, amount)
  SELECT job_id, fence, tenant_id, period_start, tokens,
         ceil(tokens * $1::numeric / 1000 * 1000000) / 1000000
  FROM due
  ON CONFLICT (job_id, fence) DO NOTHING
  RETURNING tenant_id, period_start, amount
), per_period AS (
  SELECT tenant_id, period_start, sum(amount) AS amount FROM charged GROUP BY 1, 2
), applied AS (
  INSERT INTO tenant_spend (tenant_id, period_start, reconciled)
  SELECT tenant_id, period_start, amount FROM per_period
  ON CONFLICT (tenant_id, period_start) DO UPDATE
  SET reconciled = tenant_spend.reconciled + EXCLUDED.reconciled, updated_at = now()
  RETURNING 1
)
SELECT (SELECT count(*) FROM charged) AS charged,
       (SELECT count(*) FROM per_period) AS periods,
       (SELECT count(*) FROM applied) AS applied;

-- name: spend_reservation_release_settled
-- Release up to $1 open reservations of settled jobs (SUCCEEDED, REVIEW_REQUIRED,
-- FAILED_TERMINAL, CANCELLED): each leaves tenant_spend.reserved of the period it was made
-- in; what the job used is in reconciled through its charges. $2 now (nullable).
-- A re-drive moves the job out of FAILED_TERMINAL in the transaction that adds
-- its new reservation, so a release never meets a job that needs it.
WITH due AS (
  SELECT r.id
  FROM spend_reservations r
  JOIN extraction_jobs j ON j.id = r.job_id
  WHERE r.released_at IS NULL
    AND j.state IN ('SUCCEEDED', 'REVIEW_REQUIRED', 'FAILED_TERMINAL', 'CANCELLED')
  ORDER BY r.created_at
  LIMIT $1
  FOR UPDATE OF r SKIP LOCKED
), released AS (
  UPDATE spend_reservations r
  SET released_at = coalesce($2::timestamptz, now())
  FROM due
  WHERE r.id = due.id AND r.released_at IS NULL
  RETURNING r.tenant_id, r.period_start, r.amount
), per_period AS (
  SELECT tenant_id, period_start, sum(amount) AS amount FROM released GROUP BY 1, 2
), applied AS (
  UPDATE tenant_spend s
  SET reserved = s.reserved - p.amount, updated_at = now()
  FROM per_period p
  WHERE s.tenant_id = p.tenant_id AND s.period_start = p.period_start
  RETURNING 1
)
SELECT (SELECT count(*) FROM released) AS released,
       (SELECT count(*) FROM per_period) AS periods,
       (SELECT count(*) FROM applied) AS applied;

-- name: spend_get_for_tenant
-- One tenant's spend in the period containing $3 ($2 'day' | 'month'): what is
-- held for unsettled work, what attempts reported, and the ledgers behind both.
WITH period AS (SELECT date_trunc($2, coalesce($3::timestamptz, now())) AS start)
SELECT period.start AS period_start,
       coalesce(s.reserved, 0) AS reserved,
       coalesce(s.reconciled, 0) AS reconciled,
       coalesce(r.reserved_total, 0) AS reserved_total,
       coalesce(r.released_total, 0) AS released_total,
       coalesce(r.open_reservations, 0) AS open_reservations,
       coalesce(c.charged_tokens, 0) AS charged_tokens,
       coalesce(c.charges, 0) AS charges
FROM period
LEFT JOIN tenant_spend s ON s.tenant_id = $1 AND s.period_start = period.start
LEFT JOIN LATERAL (
  SELECT sum(amount) AS reserved_total,
         sum(amount) FILTER (WHERE released_at IS NOT NULL) AS released_total,
         count(*) FILTER (WHERE released_at IS NULL) AS open_reservations
  FROM spend_reservations WHERE tenant_id = $1 AND period_start = period.start
) r ON true
LEFT JOIN LATERAL (
  SELECT sum(tokens)::bigint AS charged_tokens, count(*) AS charges
  FROM spend_charges WHERE tenant_id = $1 AND period_start = period.start
) c ON true;

-- name: spend_stats_by_tenant
-- Every tenant's spend in the period containing $2 ($1 'day' | 'month'), for the
-- spend gauges (pipeline/tenants/spend_metrics.py): estimated (every reservation
-- of the period, released or not), reserved (held now) and reconciled (reported).
WITH period AS (SELECT date_trunc($1, coalesce($2::timestamptz, now())) AS start)
SELECT s.tenant_id, s.reserved, s.reconciled,
       coalesce((SELECT sum(r.amount) FROM spend_reservations r
                 WHERE r.tenant_id = s.tenant_id AND r.period_start = s.period_start), 0)
         AS estimated
FROM tenant_spend s JOIN period ON s.period_start = period.start;
