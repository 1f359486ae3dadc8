-- The end-to-end oracle (benchmarks/chaos/oracle.py, issue 17): read-only checks
-- of the final state against what clients saw. Every query reads the whole
-- database (a chaos run and a fault test each own theirs); each returns the
-- offending rows, so an empty answer is a passed invariant. $1 is "now"
-- (nullable: the server's clock) where liveness is judged.

-- name: oracle_job_list
-- Every job with what decides whether it is settled or still explainable.
SELECT j.id, j.state, j.fence, j.attempt, j.lease_owner, j.last_error_class,
       j.terminal_reason, j.created_at, j.finished_at,
       j.lease_until > coalesce($1::timestamptz, now()) AS lease_live,
       j.available_at > coalesce($1::timestamptz, now()) AS waits_for_later,
       extract(epoch FROM j.available_at - coalesce($1::timestamptz, now()))::float8
         AS available_in_seconds,
       (SELECT count(*) FROM job_attempts a WHERE a.job_id = j.id) AS attempts,
       (SELECT count(*) FROM job_attempts a WHERE a.job_id = j.id AND a.uncertain)
         AS uncertain_attempts,
       (SELECT count(*) FROM job_attempts a WHERE a.job_id = j.id
          AND a.late_result_at IS NOT NULL) AS late_results
FROM extraction_jobs j
ORDER BY j.created_at, j.id;

-- name: oracle_stale_write_list
-- Writes that only a stale owner could have made: a result whose fence is not
-- the job's, a result without a successful attempt at its fence, a late
-- (discarded) result on an attempt that counts as the success, a success or
-- review transition whose fence differs from the claim before it, or more than
-- one successful attempt per job.
WITH ev AS (
  SELECT job_id, from_state, to_state, fence,
         lag(fence) OVER (PARTITION BY job_id ORDER BY seq) AS claim_fence
  FROM job_events
)
SELECT r.job_id, 'result fence ' || r.fence || ' but job fence ' || j.fence AS reason
FROM extraction_results r JOIN extraction_jobs j ON j.id = r.job_id
WHERE r.fence <> j.fence
UNION ALL
SELECT r.job_id, 'result at fence ' || r.fence || ' without a successful attempt there'
FROM extraction_results r
WHERE NOT EXISTS (
  SELECT 1 FROM job_attempts a
  WHERE a.job_id = r.job_id AND a.fence = r.fence
    AND a.outcome IN ('succeeded', 'review_required'))
UNION ALL
SELECT a.job_id, 'late result at fence ' || a.fence || ' recorded as outcome ' || a.outcome
FROM job_attempts a
WHERE a.late_result_at IS NOT NULL AND a.outcome IN ('succeeded', 'review_required')
UNION ALL
SELECT ev.job_id, ev.from_state || ' -> ' || ev.to_state || ' at fence ' || ev.fence
                  || ' after a claim at fence ' || ev.claim_fence
FROM ev
WHERE ev.from_state = 'RUNNING' AND ev.to_state IN ('SUCCEEDED', 'REVIEW_REQUIRED')
  AND ev.fence IS DISTINCT FROM ev.claim_fence
UNION ALL
SELECT a.job_id, count(*) || ' successful attempts'
FROM job_attempts a
WHERE a.outcome IN ('succeeded', 'review_required')
GROUP BY a.job_id HAVING count(*) > 1;

-- name: oracle_regression_list
-- Attempt numbers or fences that go backwards in a job's history: the audit
-- trail in write order, and the attempt rows in fence order.
SELECT job_id, 'job_events: attempt ' || prev_attempt || ' then ' || attempt AS reason
FROM (SELECT job_id, attempt, lag(attempt) OVER (PARTITION BY job_id ORDER BY seq) AS prev_attempt
      FROM job_events) e
WHERE attempt < prev_attempt
UNION ALL
SELECT job_id, 'job_events: fence ' || prev_fence || ' then ' || fence
FROM (SELECT job_id, fence, lag(fence) OVER (PARTITION BY job_id ORDER BY seq) AS prev_fence
      FROM job_events) e
WHERE fence < prev_fence
UNION ALL
SELECT job_id, 'job_attempts: attempt ' || prev_attempt || ' then ' || attempt || ' (by fence)'
FROM (SELECT job_id, attempt,
             lag(attempt) OVER (PARTITION BY job_id ORDER BY fence) AS prev_attempt
      FROM job_attempts) a
WHERE attempt < prev_attempt;

-- name: oracle_outbox_list
-- Per job: its execution request event and whether it was published; events
-- still unpublished are pending (the relay retries them), a missing one is lost.
SELECT j.id AS job_id,
       count(o.event_id) AS requested_events,
       count(o.event_id) FILTER (WHERE o.published_at IS NULL) AS pending,
       max(extract(epoch FROM coalesce($1::timestamptz, now()) - o.created_at))
         FILTER (WHERE o.published_at IS NULL)::float8 AS oldest_pending_seconds,
       max(o.publish_attempts) AS publish_attempts
FROM extraction_jobs j
LEFT JOIN outbox_events o ON o.job_id = j.id AND o.event_type = 'extraction.requested.v1'
GROUP BY j.id;

-- name: oracle_outbox_pending_list
-- Every unpublished event (any type), with its age and last publish error.
SELECT event_id, job_id, event_type, publish_attempts, last_error,
       extract(epoch FROM coalesce($1::timestamptz, now()) - created_at)::float8 AS age_seconds
FROM outbox_events WHERE published_at IS NULL
ORDER BY created_at, event_id;

-- name: oracle_inbox_violation_list
-- Inbox records that are not one application of one outbox event of their job:
-- an event recorded twice, or a record whose event is unknown or names
-- another job.
SELECT i.event_id, i.job_id, 'recorded ' || count(*) || ' times' AS reason
FROM execution_inbox i GROUP BY i.event_id, i.job_id HAVING count(*) > 1
UNION ALL
SELECT i.event_id, i.job_id,
       CASE WHEN o.event_id IS NULL THEN 'no such outbox event'
            ELSE 'outbox event belongs to job ' || o.job_id END
FROM execution_inbox i LEFT JOIN outbox_events o ON o.event_id = i.event_id
WHERE o.event_id IS NULL OR o.job_id <> i.job_id;

-- name: oracle_inbox_count
SELECT count(*) FROM execution_inbox;

-- name: oracle_erp_application_list
-- Per job (and per posting naming no job of ours): the reference ERP
-- receiver's applications of the posting step, next to the job's state and its
-- deliveries. Applications count once per delivery id that passed the ERP's
-- inbox, so two for one job means it reached the ERP twice.
WITH p AS (
  SELECT job_id, sum(applications)::int AS applications, sum(effect_count)::int AS effects,
         sum(deliveries_seen)::int AS deliveries_seen
  FROM erp_postings GROUP BY job_id
),
d AS (
  SELECT job_id, string_agg(state || '/' || attempts, ',' ORDER BY created_at) AS deliveries
  FROM deliveries GROUP BY job_id
)
SELECT coalesce(j.id, p.job_id) AS job_id, j.state,
       coalesce(p.applications, 0) AS applications, coalesce(p.effects, 0) AS effects,
       coalesce(p.deliveries_seen, 0) AS deliveries_seen, d.deliveries
FROM extraction_jobs j
FULL JOIN p ON p.job_id = j.id
LEFT JOIN d ON d.job_id = coalesce(j.id, p.job_id);

-- name: oracle_admission_window_list
-- Per grant of scope $1, what the scope held at the moment it was granted:
-- requests and charged tokens in the sliding window before it ($2 seconds,
-- less a $3-second tolerance) and grants open then. The ledger is written
-- after the actor's in-memory decision by separate transactions, so a release
-- counts as done up to $3 seconds after its recorded settled_at (its charge
-- then replaces its reservation; until then the reservation counts).
SELECT g.id, g.job_id, g.granted_at,
       (SELECT count(*) FROM admission_grants h
         WHERE h.scope = $1 AND h.request_charged
           AND h.granted_at > g.granted_at - make_interval(secs => $2::float8 - $3::float8)
           AND h.granted_at <= g.granted_at) AS requests,
       (SELECT coalesce(sum(CASE WHEN h.settled_at <= g.granted_at + make_interval(secs => $3::float8)
                                 THEN h.charged_tokens ELSE h.reserved_tokens END), 0)
          FROM admission_grants h
         WHERE h.scope = $1
           AND h.granted_at > g.granted_at - make_interval(secs => $2::float8 - $3::float8)
           AND h.granted_at <= g.granted_at)::bigint AS tokens,
       (SELECT count(*) FROM admission_grants h
         WHERE h.scope = $1 AND h.granted_at <= g.granted_at
           AND (h.settled_at IS NULL
                OR h.settled_at > g.granted_at + make_interval(secs => $3::float8))) AS in_flight
FROM admission_grants g
WHERE g.scope = $1
ORDER BY g.granted_at, g.id;

-- name: oracle_failure_list
-- Why each job that ended FAILED_TERMINAL ended so: its terminal reason and last
-- error, and every attempt's outcome and error, oldest first (the run's database
-- is dropped after the run, so the report keeps this). A job the reaper failed
-- before any attempt started has one row with a null fence. Not an invariant: a
-- job may fail for good by design (attempts spent, deadline passed, a permanent
-- provider error).
SELECT j.id AS job_id, j.terminal_reason, j.last_error, a.fence, a.outcome,
       a.error_class, left(a.error_detail, 300) AS error_detail,
       extract(epoch FROM a.ended_at - a.started_at)::float8 AS attempt_seconds
FROM extraction_jobs j
LEFT JOIN job_attempts a ON a.job_id = j.id
WHERE j.state = 'FAILED_TERMINAL'
ORDER BY j.created_at, j.id, a.fence;
