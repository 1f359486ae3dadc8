-- Delivery state machine. Every change out of in_flight is conditional on the
-- fence; callers check the row count (zero rows = the lease was lost).

-- name: delivery_create_for_jobs
-- Settle hook, inside the completion transaction: for each SUCCEEDED job of $1,
-- one delivery per active endpoint of its tenant whose filter takes $2. A body is
-- rendered once, here, and its exact bytes are what every attempt signs and sends.
-- An endpoint that asks for acknowledgements gives its deliveries its window and
-- an acknowledgement state ('awaiting'), fixed for the delivery's life.
-- When it created any, it wakes the dispatchers (one NOTIFY, delivered at commit).
-- Returns how many it created.
-- Each job is read by its primary key: a lookup per id that the planner cannot
-- flatten into a join (OFFSET 0), with the state compared as jobs.sql's per-row
-- statements do. As "j.id = ANY ($1) AND j.state = 'SUCCEEDED'", a plan cached
-- while the table was empty read every SUCCEEDED job of every tenant per batch
-- (tests/integration/test_batch_plans.py).
WITH job AS (
  SELECT found.*
  FROM (SELECT DISTINCT unnest($1::uuid[]) AS id) AS i CROSS JOIN LATERAL (
    SELECT j.id, j.tenant_id, j.state_version, j.result_ref, j.validation_policy,
           j.finished_at, r.result
    FROM extraction_jobs j JOIN extraction_results r ON r.job_id = j.id
    WHERE j.id = i.id AND j.state IS NOT DISTINCT FROM 'SUCCEEDED'
    OFFSET 0
  ) found
),
body AS (
  SELECT job.id, convert_to(jsonb_build_object(
           'type', $2::text,
           'timestamp', to_char(job.finished_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'data', jsonb_build_object(
             'job_id', job.id, 'tenant_id', job.tenant_id, 'state', 'SUCCEEDED',
             'state_version', job.state_version, 'result_ref', job.result_ref,
             'validation_policy', job.validation_policy, 'result', job.result))::text,
         'UTF8') AS b
  FROM job
),
created AS (
  INSERT INTO deliveries (id, tenant_id, endpoint_id, job_id, event_type, body, body_sha256,
                          state, next_attempt_at, horizon_start, created_at,
                          ack_window_seconds, ack_state)
  SELECT gen_random_uuid(), job.tenant_id, e.id, job.id, $2, body.b,
         encode(sha256(body.b), 'hex'), 'pending', job.finished_at, job.finished_at,
         job.finished_at, e.ack_window_seconds,
         CASE WHEN e.ack_window_seconds IS NOT NULL THEN 'awaiting' END
  FROM job JOIN body ON body.id = job.id
  JOIN webhook_endpoints e ON e.tenant_id = job.tenant_id
  WHERE e.state = 'active' AND (cardinality(e.event_types) = 0 OR $2 = ANY (e.event_types))
  ORDER BY job.id, e.id
  ON CONFLICT (endpoint_id, job_id, event_type) DO NOTHING
  RETURNING job_id
),
notified AS (
  SELECT pg_notify('fenceline_deliveries', job_id::text) FROM created LIMIT 1
)
SELECT (SELECT count(*) FROM created) AS created, (SELECT count(*) FROM notified) AS notified;

-- name: delivery_notify
SELECT pg_notify('fenceline_deliveries', $1);

-- name: delivery_endpoint_lock_due
-- Claim step 1: lock verified endpoints with due work whose breaker admits an
-- attempt (an unverified endpoint's deliveries are held: pending, not attempted).
-- Holding the endpoint row makes the in-flight count of step 2 exact across
-- dispatchers (step 2 runs in a later snapshot, after the lock is held).
SELECT e.id
FROM webhook_endpoints e
WHERE e.state = 'active' AND e.verification = 'verified'
  AND (e.breaker_state = 'closed' OR e.breaker_open_until <= coalesce($1::timestamptz, now()))
  AND EXISTS (
    SELECT 1 FROM deliveries d
    WHERE d.endpoint_id = e.id AND d.state IN ('pending', 'retry_scheduled')
      AND d.next_attempt_at <= coalesce($1::timestamptz, now()))
ORDER BY (SELECT min(d.next_attempt_at) FROM deliveries d
          WHERE d.endpoint_id = e.id AND d.state IN ('pending', 'retry_scheduled')), e.id
LIMIT $2
FOR UPDATE OF e SKIP LOCKED;

-- name: delivery_claim_for_endpoints
-- Claim step 2: per endpoint, up to its free slots ($3 while the breaker is
-- closed, 1 probe while half-open) minus what is already in flight; oldest due
-- first, round-robin across endpoints. $1 now, $2 endpoint ids, $3 per-endpoint
-- concurrency, $4 limit, $5 lease seconds, $6 worker id.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
ep AS (
  -- Each endpoint through its primary key (LATERAL, OFFSET 0 keeps it a lookup per
  -- id): "e.id = ANY ($2)" planned while webhook_endpoints was small was cached as
  -- a sequential scan of every tenant's endpoints, on every claim.
  SELECT e.id, e.url,
         greatest(0, (CASE WHEN e.breaker_state = 'open' THEN 1 ELSE $3::int END)
                     - (SELECT count(*) FROM deliveries f
                        WHERE f.endpoint_id = e.id AND f.state = 'in_flight'))::int AS free
  FROM (SELECT DISTINCT unnest($2::uuid[]) AS id) AS ids
  CROSS JOIN LATERAL (
    SELECT w.id, w.url, w.breaker_state FROM webhook_endpoints w
    WHERE w.id = ids.id AND w.state IS NOT DISTINCT FROM 'active'
      AND w.verification IS NOT DISTINCT FROM 'verified'
    OFFSET 0
  ) e
),
cand AS (
  SELECT c.id, c.next_attempt_at, ep.url,
         row_number() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at, c.id) AS rn
  FROM ep CROSS JOIN LATERAL (
    SELECT d.id, d.endpoint_id, d.next_attempt_at
    FROM deliveries d
    WHERE d.endpoint_id = ep.id AND d.state IN ('pending', 'retry_scheduled')
      AND d.next_attempt_at <= (SELECT t FROM now_)
    ORDER BY d.next_attempt_at, d.id
    LIMIT ep.free
    FOR UPDATE OF d SKIP LOCKED
  ) c
),
picked AS (
  SELECT id, url FROM cand ORDER BY rn, next_attempt_at, id LIMIT $4
),
claimed AS (
  UPDATE deliveries d
  SET state = 'in_flight', attempts = d.attempts + 1, fence = d.fence + 1,
      lease_until = now_.t + make_interval(secs => $5), lease_owner = $6,
      last_attempt_at = now_.t
  FROM picked, now_
  WHERE d.id = picked.id AND d.state IN ('pending', 'retry_scheduled')
  RETURNING d.id, d.tenant_id, d.endpoint_id, d.job_id, d.event_type, d.body, d.body_sha256,
            d.attempts AS attempt, d.fence, d.lease_until, picked.url, now_.t AS started_at,
            (SELECT j.traceparent FROM extraction_jobs j WHERE j.id = d.job_id) AS traceparent,
            (SELECT CASE WHEN e.breaker_state = 'open' THEN 'half_open' ELSE 'closed' END
             FROM webhook_endpoints e WHERE e.id = d.endpoint_id) AS endpoint_state
),
attempt_rows AS (
  INSERT INTO delivery_attempts (delivery_id, fence, attempt, worker_id, started_at)
  SELECT id, fence, attempt, $6, started_at FROM claimed
)
SELECT * FROM claimed;

-- name: delivery_lock_if_fenced
SELECT id, tenant_id, endpoint_id, attempts, fence, horizon_start,
       coalesce($3::timestamptz, now()) AS now
FROM deliveries
WHERE id = $1 AND state IS NOT DISTINCT FROM 'in_flight' AND fence = $2
FOR UPDATE;

-- name: delivery_deliver_if_fenced
-- A delivery that expects an acknowledgement is due one within its window from now.
UPDATE deliveries
SET state = 'delivered', lease_until = NULL, lease_owner = NULL,
    delivered_at = coalesce($5::timestamptz, now()), last_status = $3, last_error = NULL,
    last_latency_ms = $4,
    ack_due_at = coalesce($5::timestamptz, now()) + make_interval(secs => ack_window_seconds)
WHERE id = $1 AND state IS NOT DISTINCT FROM 'in_flight' AND fence = $2
RETURNING id;

-- name: delivery_retry_if_fenced
UPDATE deliveries
SET state = 'retry_scheduled', lease_until = NULL, lease_owner = NULL, next_attempt_at = $3,
    last_status = $4, last_error = $5, last_latency_ms = $6
WHERE id = $1 AND state IS NOT DISTINCT FROM 'in_flight' AND fence = $2
RETURNING id, next_attempt_at;

-- name: delivery_give_up_if_fenced
-- $3 is 'failed' (the endpoint refused, or retries ran out) or 'abandoned'
-- (the endpoint was disabled).
UPDATE deliveries
SET state = $3, lease_until = NULL, lease_owner = NULL, final_reason = $4, last_status = $5,
    last_error = $6, last_latency_ms = $7
WHERE id = $1 AND state IS NOT DISTINCT FROM 'in_flight' AND fence = $2 AND $3 IN ('failed', 'abandoned')
RETURNING id;

-- name: delivery_abandon_waiting_for_endpoint
-- A disabled endpoint: waiting deliveries stop; redrive brings them back.
UPDATE deliveries
SET state = 'abandoned', final_reason = $2
WHERE endpoint_id = $1 AND state IN ('pending', 'retry_scheduled')
RETURNING id;

-- name: delivery_attempt_close_if_running
UPDATE delivery_attempts
SET ended_at = coalesce($12::timestamptz, now()), outcome = $3, http_status = $4,
    error_class = $5, error = $6, latency_ms = $7, signed_timestamp = $8, key_ids = $9,
    address = $10, next_attempt_at = $11
WHERE delivery_id = $1 AND fence = $2 AND outcome = 'running'
RETURNING delivery_id;

-- name: delivery_select_expired_leases
SELECT id, fence, endpoint_id, coalesce($1::timestamptz, now()) AS now
FROM deliveries
WHERE state = 'in_flight' AND lease_until <= coalesce($1::timestamptz, now())
ORDER BY lease_until
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: delivery_reschedule_if_expired
-- The owner vanished mid-attempt (the ERP may have accepted): fence+1 so it can
-- never commit, and retry at once; the receiver deduplicates on the delivery id.
UPDATE deliveries
SET state = 'retry_scheduled', fence = fence + 1, lease_until = NULL, lease_owner = NULL,
    next_attempt_at = coalesce($3::timestamptz, now()), last_error = 'lease_expired'
WHERE id = $1 AND state IS NOT DISTINCT FROM 'in_flight' AND fence = $2
  AND lease_until <= coalesce($3::timestamptz, now())
RETURNING id, fence;

-- name: delivery_attempt_expire_if_running
UPDATE delivery_attempts
SET ended_at = coalesce($3::timestamptz, now()), outcome = 'lease_expired',
    error_class = 'lease_expired', next_attempt_at = coalesce($3::timestamptz, now())
WHERE delivery_id = $1 AND fence = $2 AND outcome = 'running'
RETURNING delivery_id;

-- name: delivery_redrive_if_given_up
-- Operator redrive: the same delivery id (the receiver still deduplicates), a
-- fresh retry horizon. A delivery its job's cancellation stopped stays stopped.
UPDATE deliveries
SET state = 'pending', final_reason = NULL, next_attempt_at = coalesce($3::timestamptz, now()),
    horizon_start = coalesce($3::timestamptz, now())
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND state IN ('failed', 'abandoned')
  AND final_reason IS DISTINCT FROM 'job_cancelled'
RETURNING id, endpoint_id;

-- name: delivery_get_for_tenant
SELECT id, tenant_id, endpoint_id, job_id, event_type, body_sha256, state, attempts, fence,
       next_attempt_at, last_status, last_error, last_latency_ms, last_attempt_at,
       final_reason, created_at, updated_at, delivered_at, ack_state, ack_window_seconds,
       ack_due_at, ack_overdue_at, acknowledged_at, ack_reason, ack_message_id
FROM deliveries WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2;

-- name: delivery_list_for_job
SELECT id, tenant_id, endpoint_id, job_id, event_type, body_sha256, state, attempts, fence,
       next_attempt_at, last_status, last_error, last_latency_ms, last_attempt_at,
       final_reason, created_at, updated_at, delivered_at, ack_state, ack_window_seconds,
       ack_due_at, ack_overdue_at, acknowledged_at, ack_reason, ack_message_id
FROM deliveries WHERE job_id = $1 AND tenant_id = $2
ORDER BY created_at, id;

-- name: delivery_attempt_list_for_tenant
SELECT a.delivery_id, a.fence, a.attempt, a.worker_id, a.started_at, a.ended_at, a.outcome,
       a.http_status, a.error_class, a.error, a.latency_ms, a.signed_timestamp, a.key_ids,
       a.address, a.next_attempt_at
FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
WHERE a.delivery_id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2
ORDER BY a.fence;

-- name: delivery_backlog_stats
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'retry_scheduled') AS retry_scheduled,
       count(*) FILTER (WHERE state = 'in_flight') AS in_flight,
       count(*) FILTER (WHERE state = 'delivered') AS delivered,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(*) FILTER (WHERE state = 'abandoned') AS abandoned,
       extract(epoch FROM coalesce($1::timestamptz, now()) - min(next_attempt_at)
               FILTER (WHERE state IN ('pending', 'retry_scheduled')
                         AND next_attempt_at <= coalesce($1::timestamptz, now())))
         AS oldest_due_age_seconds
FROM deliveries;

-- name: delivery_state_transition_list
SELECT from_state, to_state FROM delivery_state_transitions ORDER BY 1, 2;

-- name: delivery_lag_stats
-- Delivery lag per endpoint state (pipeline/delivery/metrics.py): deliveries not yet
-- delivered nor given up, and the age of the oldest since it was created (its job
-- settled). Endpoint state: disabled, open (breaker cooling down), half_open (its
-- cooldown over, one probe at a time), closed. $1 now.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t)
SELECT CASE WHEN e.state = 'disabled' THEN 'disabled'
            WHEN e.breaker_state = 'open' AND e.breaker_open_until > now_.t THEN 'open'
            WHEN e.breaker_state = 'open' THEN 'half_open'
            ELSE 'closed' END AS endpoint_state,
       count(*) AS pending,
       coalesce(extract(epoch FROM now_.t - min(d.created_at)), 0) AS oldest_seconds
FROM deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id CROSS JOIN now_
WHERE d.state IN ('pending', 'retry_scheduled', 'in_flight')
GROUP BY 1, now_.t;
