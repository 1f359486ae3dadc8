-- Admission ledger (issue 6): grants of the admission actor and their settlement.
-- Writes are guarded (a grant settles once, from 'granted'); reads are scoped to
-- one tenant except the operator report and the actor's own window replay.

-- name: admission_grant_insert
-- $1 id, $2 scope, $3 tenant, $4 job (nullable), $5 fence (nullable),
-- $6 priority class, $7 reserved tokens, $8 now (nullable), $9 the output cap's
-- part of the reservation (nullable; spend prices it as completion tokens).
INSERT INTO admission_grants (id, scope, tenant_id, job_id, fence, priority_class,
                              reserved_tokens, granted_at, reserved_output_tokens)
VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()), $9);

-- name: admission_grant_settle_if_open
-- The driver's release: outcome and charge decided by the policy's reconciliation.
-- $1 id, $2 outcome, $3 charged tokens, $4 request charged, $5 prompt, $6 completion,
-- $7 cached, $8 settled by ('driver' | 'expiry'), $9 now (nullable).
UPDATE admission_grants
SET outcome = $2, charged_tokens = $3, request_charged = $4,
    prompt_tokens = $5, completion_tokens = $6, cached_tokens = $7,
    settled_by = $8, settled_at = coalesce($9::timestamptz, now())
WHERE id = $1 AND outcome = 'granted'
RETURNING id;

-- name: admission_grant_expire_if_stale
-- Open grants of a scope held longer than $2 seconds: the holder crashed or lost
-- the answer. They stay charged at the full reservation (the call may have been
-- billed). $1 scope, $2 seconds, $3 now (nullable).
UPDATE admission_grants
SET outcome = 'uncertain', charged_tokens = reserved_tokens, settled_by = 'expiry',
    settled_at = coalesce($3::timestamptz, now())
WHERE scope = $1 AND outcome = 'granted'
  AND granted_at <= coalesce($3::timestamptz, now()) - make_interval(secs => $2)
RETURNING id;

-- name: admission_grant_list_window
-- What a restarted actor replays: every grant of the scope still inside the
-- sliding window, and every open grant. $1 scope, $2 window seconds, $3 now.
SELECT id, tenant_id, priority_class, reserved_tokens, charged_tokens, request_charged,
       outcome, job_id, fence,
       extract(epoch FROM coalesce($3::timestamptz, now()) - granted_at)::float8 AS age_seconds
FROM admission_grants
WHERE scope = $1
  AND (outcome = 'granted'
       OR granted_at > coalesce($3::timestamptz, now()) - make_interval(secs => $2))
ORDER BY granted_at, id;

-- name: admission_grant_list_by_job
-- The grants of one job's attempts (explain). $1 tenant, $2 job.
SELECT id, scope, tenant_id, job_id, fence, priority_class, reserved_tokens,
       prompt_tokens, completion_tokens, cached_tokens, charged_tokens, request_charged,
       outcome, settled_by, granted_at, settled_at
FROM admission_grants
WHERE tenant_id = $1 AND job_id = $2
ORDER BY granted_at, id;

-- name: admission_report_by_tenant
-- Reserved vs charged vs reported tokens of one tenant, per scope. Open grants
-- count at their reservation. $1 tenant, $2 scope (nullable: all), $3 since,
-- $4 until (nullable: unbounded).
SELECT tenant_id, scope,
       count(*) AS grants,
       count(*) FILTER (WHERE outcome = 'granted') AS open,
       count(*) FILTER (WHERE outcome = 'reconciled') AS reconciled,
       count(*) FILTER (WHERE outcome = 'uncertain') AS uncertain,
       count(*) FILTER (WHERE outcome = 'refunded') AS refunded,
       count(*) FILTER (WHERE settled_by = 'expiry') AS expired,
       count(*) FILTER (WHERE request_charged) AS requests_charged,
       coalesce(sum(reserved_tokens), 0)::bigint AS reserved_tokens,
       coalesce(sum(coalesce(charged_tokens, reserved_tokens)), 0)::bigint AS charged_tokens,
       coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
       coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
       coalesce(sum(cached_tokens), 0)::bigint AS cached_tokens,
       coalesce(sum(reserved_tokens) FILTER (WHERE outcome = 'uncertain'
                                               AND prompt_tokens IS NULL), 0)::bigint
         AS uncertain_unreported_tokens
FROM admission_grants
WHERE tenant_id = $1
  AND ($2::text IS NULL OR scope = $2)
  AND granted_at >= coalesce($3::timestamptz, '-infinity')
  AND granted_at < coalesce($4::timestamptz, 'infinity')
GROUP BY tenant_id, scope
ORDER BY scope;

-- name: admission_report_list
-- Operator view (all tenants): the same figures per tenant and scope.
-- $1 scope (nullable: all), $2 since, $3 until (nullable: unbounded).
SELECT tenant_id, scope,
       count(*) AS grants,
       count(*) FILTER (WHERE outcome = 'granted') AS open,
       count(*) FILTER (WHERE outcome = 'reconciled') AS reconciled,
       count(*) FILTER (WHERE outcome = 'uncertain') AS uncertain,
       count(*) FILTER (WHERE outcome = 'refunded') AS refunded,
       count(*) FILTER (WHERE settled_by = 'expiry') AS expired,
       count(*) FILTER (WHERE request_charged) AS requests_charged,
       coalesce(sum(reserved_tokens), 0)::bigint AS reserved_tokens,
       coalesce(sum(coalesce(charged_tokens, reserved_tokens)), 0)::bigint AS charged_tokens,
       coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
       coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
       coalesce(sum(cached_tokens), 0)::bigint AS cached_tokens,
       coalesce(sum(reserved_tokens) FILTER (WHERE outcome = 'uncertain'
                                               AND prompt_tokens IS NULL), 0)::bigint
         AS uncertain_unreported_tokens
FROM admission_grants
WHERE ($1::text IS NULL OR scope = $1)
  AND granted_at >= coalesce($2::timestamptz, '-infinity')
  AND granted_at < coalesce($3::timestamptz, 'infinity')
GROUP BY tenant_id, scope
ORDER BY tenant_id, scope;

-- name: admission_scope_upsert
-- The limits a (re)started admission actor enforces for its scope; the latest
-- writer wins. $1 scope, $2 rpm, $3 tpm, $4 max in flight, $5 max concurrent tokens,
-- $6 default per-tenant in flight, $7 per-tenant overrides (jsonb object),
-- $8 window seconds, $9 actor incarnation, $10 now (nullable).
INSERT INTO admission_scopes (scope, rpm, tpm, max_in_flight, max_concurrent_tokens,
                              tenant_max_in_flight, tenant_in_flight, window_seconds,
                              incarnation, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10::timestamptz, now()))
ON CONFLICT (scope) DO UPDATE
SET rpm = EXCLUDED.rpm, tpm = EXCLUDED.tpm, max_in_flight = EXCLUDED.max_in_flight,
    max_concurrent_tokens = EXCLUDED.max_concurrent_tokens,
    tenant_max_in_flight = EXCLUDED.tenant_max_in_flight,
    tenant_in_flight = EXCLUDED.tenant_in_flight, window_seconds = EXCLUDED.window_seconds,
    incarnation = EXCLUDED.incarnation, recorded_at = EXCLUDED.recorded_at
RETURNING scope;
