-- Delivery state machine. Every change out of in_flight is conditional on the
-- fence; callers check the row count (zero rows = the lease was lost).

-- name: delivery_create_for_jobs
-- Settle hook, inside the completion transaction: for each SUCCEEDED job of $1,
-- one delivery per active endpoint of its tenant whose filter takes the job's event
-- type: $3 for a credit note (its result's document_type), with the invoice it credits
-- (credit_note_links) as data.credited_invoice, else $2. A body is
-- rendered once, here, and its exact bytes are what every attempt signs and sends.
-- data.payee_account says which account the ERP pays (see the body).
-- An endpoint that asks for acknowledgements gives its deliveries its window and
-- an acknowledgement state ('awaiting'), fixed for the delivery's life. A credit
-- note's delivery is held (after_id) behind its credited invoice's delivery to the
-- same endpoint until that one is delivered.
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
           j.finished_at, r.result,
           CASE WHEN r.result->>'document_type' = 'credit_note' THEN $3::text
                ELSE $2::text END AS event_type
    FROM extraction_jobs j JOIN extraction_results r ON r.job_id = j.id
    WHERE j.id = i.id AND j.state IS NOT DISTINCT FROM 'SUCCEEDED'
    OFFSET 0
  ) found
),
body AS (
  SELECT job.id, convert_to(jsonb_build_object(
           'type', job.event_type,
           'timestamp', to_char(job.finished_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'data', jsonb_build_object(
             'job_id', job.id, 'tenant_id', job.tenant_id, 'state', 'SUCCEEDED',
             'state_version', job.state_version, 'result_ref', job.result_ref,
             'validation_policy', job.validation_policy, 'result', job.result,
             -- Which account the ERP pays: the IBAN the result states (checked against
             -- master data), the national account it states (a bankgiro: on file for
             -- the supplier), none (a credit note; a supplier that collects by card or
             -- direct debit), or, where the invoice states no account to pay, the
             -- supplier's account on file in the ERP's vendor master (docs/delivery.md).
             -- A sealed member is a string, an open one an object.
             'payee_account', CASE
               WHEN jsonb_typeof(job.result->'iban') IN ('object', 'string') THEN 'iban'
               WHEN jsonb_typeof(job.result->'payee_account') IN ('object', 'string')
                 THEN 'national'
               WHEN job.result->>'document_type' = 'credit_note' THEN 'none'
               WHEN jsonb_typeof(job.result->'payment_means') = 'object' THEN 'collected'
               ELSE 'on_file' END)
             || CASE WHEN job.event_type = $3::text THEN jsonb_build_object(
                  'credited_invoice', (
                    SELECT jsonb_build_object(
                             'job_id', l.invoice_job_id,
                             'invoice_number', job.result->'preceding_invoice'->>'number')
                    FROM credit_note_links l
                    WHERE l.job_id = job.id AND l.tenant_id = job.tenant_id))
                ELSE '{}'::jsonb END)::text,
         'UTF8') AS b
  FROM job
),
created AS (
  INSERT INTO deliveries (id, tenant_id, endpoint_id, job_id, event_type, body, body_sha256,
                          state, next_attempt_at, horizon_start, created_at,
                          ack_window_seconds, ack_state, after_id)
  SELECT gen_random_uuid(), job.tenant_id, e.id, job.id, job.event_type, body.b,
         encode(sha256(body.b), 'hex'), 'pending', job.finished_at, job.finished_at,
         job.finished_at, e.ack_window_seconds,
         CASE WHEN e.ack_window_seconds IS NOT NULL THEN 'awaiting' END,
         -- A credit note waits for its credited invoice's delivery to the same
         -- endpoint while that one is not delivered: an ERP books a credit only
         -- against an invoice it has.
         CASE WHEN job.event_type = $3::text THEN (
           SELECT p.id FROM credit_note_links l
           CROSS JOIN LATERAL (
             SELECT d.id, d.state FROM deliveries d
             WHERE d.endpoint_id = e.id AND d.job_id = l.invoice_job_id
               AND d.event_type = $2::text
             OFFSET 0
           ) p
           WHERE l.job_id = job.id AND l.tenant_id = job.tenant_id
             AND p.state IS DISTINCT FROM 'delivered'
           LIMIT 1) END
  FROM job JOIN body ON body.id = job.id
  JOIN webhook_endpoints e ON e.tenant_id = job.tenant_id
  WHERE e.state = 'active'
    AND (cardinality(e.event_types) = 0 OR job.event_type = ANY (e.event_types))
  ORDER BY job.id, e.id
  ON CONFLICT (endpoint_id, job_id, event_type) DO NOTHING
  RETURNING job_id
),
notified AS (
  SELECT pg_notify('fenceline_deliveries', job_id::text) FROM created LIMIT 1
)
SELECT (SELECT count(*) FROM created) AS created, (SELECT count(*) FROM notified) AS notified;

-- name: delivery_create_for_supersessions
-- Settle hook, after delivery_create_for_jobs in the same transaction: for each job
-- of $1 that superseded the job at the same place of $2 (pipeline/jobs/versions.py),
-- one invoice.superseded.v1 ($3) delivery for the old job per active endpoint of the
-- tenant whose filter takes $3 or the new job's event $4, and the new job's $4
-- deliveries to those endpoints (or its credit_note.created.v1: any event of the new
-- job but $3) wait for it (after_id): the ERP sees the old version withdrawn before
-- the new one arrives. Returns how many it created and ordered.
WITH pair AS (
  SELECT p.new_job, p.old_job, j.tenant_id, j.finished_at, v.version
  FROM unnest($1::uuid[], $2::uuid[]) AS p(new_job, old_job)
  CROSS JOIN LATERAL (
    SELECT n.tenant_id, n.finished_at FROM extraction_jobs n
    WHERE n.id = p.new_job AND n.state IS NOT DISTINCT FROM 'SUCCEEDED'
    OFFSET 0
  ) j
  CROSS JOIN LATERAL (
    SELECT iv.version FROM invoice_versions iv
    WHERE iv.job_id = p.new_job AND iv.supersedes = p.old_job
    OFFSET 0
  ) v
),
body AS (
  SELECT pair.*, convert_to(jsonb_build_object(
           'type', $3::text,
           'timestamp', to_char(pair.finished_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'data', jsonb_build_object(
             'job_id', pair.old_job, 'tenant_id', pair.tenant_id,
             'superseded_by', pair.new_job, 'version', pair.version))::text,
         'UTF8') AS b
  FROM pair
),
created AS (
  INSERT INTO deliveries (id, tenant_id, endpoint_id, job_id, event_type, body, body_sha256,
                          state, next_attempt_at, horizon_start, created_at)
  SELECT gen_random_uuid(), body.tenant_id, e.id, body.old_job, $3, body.b,
         encode(sha256(body.b), 'hex'), 'pending', body.finished_at, body.finished_at,
         body.finished_at
  FROM body JOIN webhook_endpoints e ON e.tenant_id = body.tenant_id
  WHERE e.state = 'active'
    AND (cardinality(e.event_types) = 0 OR $3 = ANY (e.event_types) OR $4 = ANY (e.event_types))
  ORDER BY body.old_job, e.id
  ON CONFLICT (endpoint_id, job_id, event_type) DO NOTHING
  RETURNING id, endpoint_id, job_id
),
ordered AS (
  UPDATE deliveries d SET after_id = c.id
  FROM created c JOIN body ON body.old_job = c.job_id
  WHERE d.endpoint_id = c.endpoint_id AND d.job_id = body.new_job AND d.event_type <> $3
    AND d.state = 'pending' AND d.after_id IS NULL
  RETURNING d.id
)
SELECT (SELECT count(*) FROM created) AS created, (SELECT count(*) FROM ordered) AS ordered;

-- name: delivery_notify
SELECT pg_notify('fenceline_deliveries', $1);

-- name: delivery_endpoint_lock_due
-- Claim step 1: lock verified endpoints with due work whose breaker admits an
-- attempt (an unverified endpoint's deliveries are held: pending, not attempted;
-- so is a delivery whose after_id is not delivered yet).
-- Holding the endpoint row makes the in-flight count of step 2 exact across
-- dispatchers (step 2 runs in a later snapshot, after the lock is held).
SELECT e.id
FROM webhook_endpoints e
WHERE e.state = 'active' AND e.verification = 'verified'
  AND (e.breaker_state = 'closed' OR e.breaker_open_until <= coalesce($1::timestamptz, now()))
  AND EXISTS (
    SELECT 1 FROM deliveries d
    WHERE d.endpoint_id = e.id AND d.state IN ('pending', 'retry_scheduled')
      AND d.next_attempt_at <= coalesce($1::timestamptz, now())
      AND (d.after_id IS NULL OR EXISTS (
        SELECT 1 FROM deliveries p WHERE p.id = d.after_id AND p.state = 'delivered')))
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
      -- held until the delivery it must follow is delivered (a superseded version)
      AND (d.after_id IS NULL OR EXISTS (
        SELECT 1 FROM deliveries p WHERE p.id = d.after_id AND p.state = 'delivered'))
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

-- name: delivery_log_page_for_tenant
-- The tenant's delivery log (GET /v1/deliveries), newest first: a keyset page in the
-- order of deliveries_tenant_created (created_at DESC, id). $2 job, $3 endpoint,
-- $4 state (each NULL: any); $5/$6 the (created_at, id) of the previous page's last
-- row (NULL: the first page); $7 the page size. Never the body, only whether it is
-- still held (a resend needs it).
SELECT d.id, d.job_id, d.endpoint_id, d.event_type, d.state, d.attempts, d.last_status,
       d.last_latency_ms, d.last_attempt_at, d.next_attempt_at, d.final_reason, d.body_sha256,
       octet_length(d.body) > 0 AS body_available, d.created_at, d.updated_at, d.delivered_at
FROM deliveries d
WHERE d.tenant_id = $1
  AND ($2::uuid IS NULL OR d.job_id = $2::uuid)
  AND ($3::uuid IS NULL OR d.endpoint_id = $3::uuid)
  AND ($4::text IS NULL OR d.state = $4::text)
  AND ($5::timestamptz IS NULL OR d.created_at < $5::timestamptz
       OR (d.created_at = $5::timestamptz AND d.id > $6::uuid))
ORDER BY d.created_at DESC, d.id
LIMIT $7;

-- name: delivery_log_get_for_tenant
-- One delivery of the tenant's log, with its endpoint's URL and why it cannot be
-- resent where it cannot: the body erased with its job (job_erasures) or removed
-- by retention, the job cancelled, the endpoint disabled.
SELECT d.id, d.job_id, d.endpoint_id, e.url AS endpoint_url, e.state AS endpoint_state,
       d.event_type, d.state, d.attempts, d.last_status, d.last_latency_ms, d.last_attempt_at,
       d.next_attempt_at, d.final_reason, d.body_sha256,
       octet_length(d.body) > 0 AS body_available,
       EXISTS (SELECT 1 FROM job_erasures x WHERE x.job_id = d.job_id) AS job_erased,
       d.created_at, d.updated_at, d.delivered_at
FROM deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2;

-- name: delivery_resend_if_resendable
-- The tenant's resend: a new attempt of the same delivery (same id, same body bytes),
-- due at once with a fresh retry horizon. A delivered, failed or abandoned delivery
-- goes back to pending; a waiting one (pending, retry_scheduled) stays waiting and
-- is only brought forward, so a second resend before the dispatcher came adds no
-- attempt. Refused (no row) while it is in flight, when its body was erased or
-- removed by retention, when its job's cancellation stopped it, or when its endpoint
-- is disabled. $3 now.
UPDATE deliveries d
SET state = CASE WHEN d.state IN ('pending', 'retry_scheduled') THEN d.state ELSE 'pending' END,
    final_reason = NULL, delivered_at = NULL,
    next_attempt_at = CASE WHEN d.state IN ('pending', 'retry_scheduled')
                           THEN least(d.next_attempt_at, coalesce($3::timestamptz, now()))
                           ELSE coalesce($3::timestamptz, now()) END,
    horizon_start = CASE WHEN d.state IN ('pending', 'retry_scheduled') THEN d.horizon_start
                         ELSE coalesce($3::timestamptz, now()) END
WHERE d.id = $1 AND d.tenant_id IS NOT DISTINCT FROM $2
  AND d.state IN ('delivered', 'failed', 'abandoned', 'pending', 'retry_scheduled')
  AND d.body <> '\x'::bytea
  AND d.final_reason IS DISTINCT FROM 'job_cancelled'
  AND EXISTS (SELECT 1 FROM webhook_endpoints e
              WHERE e.id = d.endpoint_id AND e.state IS NOT DISTINCT FROM 'active')
RETURNING d.id, d.endpoint_id, d.state, d.next_attempt_at;
