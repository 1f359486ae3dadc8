-- Tenant spend: reservations at admission, charges of reported usage, releases
-- of settled jobs' reservations (issue 20, item 5). tenant_spend itself is
-- created by spend_reserve_for_job in the admitting transaction.

-- name: spend_reserve_for_job
-- One statement (one round trip, function spend_reserve of migration 018): charge
-- the period's reserved total and record the job's reservation.
-- $1 id, $2 job, $3 tenant, $4 'day' | 'month', $5 now (nullable), $6 amount.
SELECT spend_reserve($1, $2, $3, $4, $5, $6) AS id;

-- name: spend_charge_attempts
-- Charge up to $2 ended attempts not yet charged into tenant_spend.reconciled of
-- the period ($1) the attempt ended in. Prompt and completion tokens are priced
-- apart: at the prices of the model the attempt recorded (parallel arrays $5 names,
-- $6 prompt and $7 completion prices per 1,000), else at the defaults ($3 prompt,
-- $4 completion), rounded up to 1e-6 once.
-- What is counted:
--   * usage reported (prompt or completion known): those tokens;
--   * usage unknown and the provider may have billed the call (uncertain: a
--     timeout, a drained or cancelled call; or the reaper closed it,
--     lease_expired): the attempt's reservation, marked estimated. That is its
--     admission grant's (prompt estimate, output cap), or, without a grant, the
--     job's estimate with at most $8 tokens of it (the output reserve) as output.
--     spend_reconcile_estimates replaces it once the attempt reports;
--   * usage unknown and nothing billed (a refusal before any call): nothing.
-- ON CONFLICT makes a concurrent pass charge nothing twice; `charged` and
-- `periods` let the caller check every charge reached tenant_spend.
WITH due AS (
  SELECT a.job_id, a.fence, j.tenant_id, a.engine, j.estimated_tokens,
         date_trunc($1, coalesce(a.late_result_at, a.ended_at)) AS period_start,
         (a.prompt_tokens IS NULL AND a.completion_tokens IS NULL
          AND (a.uncertain OR a.outcome = 'lease_expired')) AS estimated,
         coalesce(a.prompt_tokens, 0) AS reported_prompt,
         coalesce(a.completion_tokens, 0) AS reported_completion
  FROM job_attempts a
  JOIN extraction_jobs j ON j.id = a.job_id
  WHERE a.outcome <> 'running'
    AND NOT EXISTS (SELECT 1 FROM spend_charges c WHERE c.job_id = a.job_id AND c.fence = a.fence)
  ORDER BY a.ended_at
  LIMIT $2
), counted AS (
  SELECT d.job_id, d.fence, d.tenant_id, d.period_start, d.engine, d.estimated,
         CASE WHEN NOT d.estimated THEN d.reported_prompt
              WHEN g.reserved_tokens IS NOT NULL
                THEN g.reserved_tokens - coalesce(g.reserved_output_tokens, g.reserved_tokens)
              ELSE greatest(d.estimated_tokens - $8::integer, 0) END AS prompt_tokens,
         CASE WHEN NOT d.estimated THEN d.reported_completion
              WHEN g.reserved_tokens IS NOT NULL
                THEN coalesce(g.reserved_output_tokens, g.reserved_tokens)
              ELSE least(d.estimated_tokens, $8::integer) END AS completion_tokens
  FROM due d
  LEFT JOIN LATERAL (
    SELECT reserved_tokens, reserved_output_tokens FROM admission_grants
    WHERE job_id = d.job_id AND fence = d.fence
    ORDER BY granted_at DESC LIMIT 1
  ) g ON d.estimated
), priced AS (
  SELECT c.*, coalesce(p.prompt_price, $3::numeric) AS prompt_price,
         coalesce(p.completion_price, $4::numeric) AS completion_price
  FROM counted c
  LEFT JOIN unnest($5::text[], $6::numeric[], $7::numeric[])
    AS p(name, prompt_price, completion_price) ON p.name = c.engine
), charged AS (
  INSERT INTO spend_charges (job_id, fence, tenant_id, period_start, tokens, amount,
                             prompt_tokens, completion_tokens, model, prompt_price_per_1k,
                             completion_price_per_1k, estimated)
  SELECT job_id, fence, tenant_id, period_start, prompt_tokens + completion_tokens,
         ceil((prompt_tokens * prompt_price + completion_tokens * completion_price)
              / 1000 * 1000000) / 1000000,
         prompt_tokens, completion_tokens, engine, prompt_price, completion_price, estimated
  FROM priced
  ON CONFLICT (job_id, fence) DO NOTHING
  RETURNING tenant_id, period_start, amount, estimated
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
       (SELECT count(*) FROM charged WHERE estimated) AS estimated,
       (SELECT count(*) FROM per_period) AS periods,
       (SELECT count(*) FROM applied) AS applied;

-- name: spend_reconcile_estimates
-- Replace up to $1 estimated charges whose attempt has since reported its usage (a
-- late result) with that usage, priced as spend_charge_attempts prices it ($2/$3
-- default prompt/completion prices, $4 names, $5/$6 their prices), in the charge's
-- own period; tenant_spend.reconciled moves by the difference. The charge keeps
-- the estimate it replaced (estimated_amount) and when ($7 now, nullable). Locked
-- and conditional on `estimated`, so a concurrent pass replaces nothing twice.
WITH due AS (
  SELECT c.job_id, c.fence, c.amount AS old_amount, a.engine,
         coalesce(a.prompt_tokens, 0) AS prompt_tokens,
         coalesce(a.completion_tokens, 0) AS completion_tokens
  FROM spend_charges c
  JOIN job_attempts a ON a.job_id = c.job_id AND a.fence = c.fence
  WHERE c.estimated AND (a.prompt_tokens IS NOT NULL OR a.completion_tokens IS NOT NULL)
  ORDER BY c.created_at
  LIMIT $1
  FOR UPDATE OF c SKIP LOCKED
), priced AS (
  SELECT d.*, coalesce(p.prompt_price, $2::numeric) AS prompt_price,
         coalesce(p.completion_price, $3::numeric) AS completion_price
  FROM due d
  LEFT JOIN unnest($4::text[], $5::numeric[], $6::numeric[])
    AS p(name, prompt_price, completion_price) ON p.name = d.engine
), replaced AS (
  UPDATE spend_charges c
  SET estimated = false, reconciled_at = coalesce($7::timestamptz, now()),
      estimated_amount = c.amount, tokens = p.prompt_tokens + p.completion_tokens,
      prompt_tokens = p.prompt_tokens, completion_tokens = p.completion_tokens,
      model = p.engine, prompt_price_per_1k = p.prompt_price,
      completion_price_per_1k = p.completion_price,
      amount = ceil((p.prompt_tokens * p.prompt_price
                     + p.completion_tokens * p.completion_price) / 1000 * 1000000) / 1000000
  FROM priced p
  WHERE c.job_id = p.job_id AND c.fence = p.fence AND c.estimated
  RETURNING c.tenant_id, c.period_start, c.amount - p.old_amount AS delta
), per_period AS (
  SELECT tenant_id, period_start, sum(delta) AS delta FROM replaced GROUP BY 1, 2
), applied AS (
  UPDATE tenant_spend s
  SET reconciled = s.reconciled + p.delta, updated_at = now()
  FROM per_period p
  WHERE s.tenant_id = p.tenant_id AND s.period_start = p.period_start
  RETURNING 1
)
SELECT (SELECT count(*) FROM replaced) AS replaced,
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
       coalesce(c.charges, 0) AS charges,
       coalesce(c.estimated_charges, 0) AS estimated_charges,
       coalesce(c.estimated_amount, 0) AS estimated_amount,
       coalesce(c.replaced_estimates, 0) AS replaced_estimates
FROM period
LEFT JOIN tenant_spend s ON s.tenant_id = $1 AND s.period_start = period.start
LEFT JOIN LATERAL (
  SELECT sum(amount) AS reserved_total,
         sum(amount) FILTER (WHERE released_at IS NOT NULL) AS released_total,
         count(*) FILTER (WHERE released_at IS NULL) AS open_reservations
  FROM spend_reservations WHERE tenant_id = $1 AND period_start = period.start
) r ON true
LEFT JOIN LATERAL (
  SELECT sum(tokens)::bigint AS charged_tokens, count(*) AS charges,
         count(*) FILTER (WHERE estimated) AS estimated_charges,
         sum(amount) FILTER (WHERE estimated) AS estimated_amount,
         count(*) FILTER (WHERE reconciled_at IS NOT NULL) AS replaced_estimates
  FROM spend_charges WHERE tenant_id = $1 AND period_start = period.start
) c ON true;

-- name: spend_charges_by_model
-- One tenant's charges in the period containing $3 ($2 'day' | 'month'), per model
-- and the prices it was charged at: prompt and completion tokens, the amount, and
-- the part still estimated (uncertain attempts charged at their reservation).
-- Charges written before prompt and completion were priced apart show their
-- tokens as prompt tokens and no prices.
WITH period AS (SELECT date_trunc($2, coalesce($3::timestamptz, now())) AS start)
SELECT c.model, c.prompt_price_per_1k, c.completion_price_per_1k,
       count(*) AS charges,
       coalesce(sum(coalesce(c.prompt_tokens, c.tokens)), 0)::bigint AS prompt_tokens,
       coalesce(sum(c.completion_tokens), 0)::bigint AS completion_tokens,
       sum(c.amount) AS amount,
       count(*) FILTER (WHERE c.estimated) AS estimated_charges,
       coalesce(sum(c.amount) FILTER (WHERE c.estimated), 0) AS estimated_amount
FROM spend_charges c JOIN period ON c.period_start = period.start
WHERE c.tenant_id = $1
GROUP BY 1, 2, 3
ORDER BY 1 NULLS LAST, 2, 3;

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

-- name: spend_charge_list_for_job
-- What each attempt of one job was charged (explain): tokens, prices, amount, and
-- whether it is an estimate (the attempt's reservation) or replaced one. $1 tenant,
-- $2 job.
SELECT fence, model, prompt_tokens, completion_tokens, tokens, prompt_price_per_1k,
       completion_price_per_1k, amount, estimated, estimated_amount, reconciled_at,
       period_start, created_at
FROM spend_charges
WHERE tenant_id = $1 AND job_id = $2
ORDER BY fence;
