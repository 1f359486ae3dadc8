-- Ingress consumer and durable scheduler queries. The inbox transaction never
-- changes a job's state: acceptance already made it READY, and a redelivery must
-- not reset a RUNNING or settled job.

-- name: inbox_job_state
-- The job an event names (read only: the inbox never writes the job).
SELECT id, tenant_id, state, state_version, fence
FROM extraction_jobs WHERE id = $1;

-- name: inbox_insert_if_new
-- $1 event id, $2 job id, $3 payload digest, $4 now.
INSERT INTO execution_inbox (event_id, job_id, payload_digest, received_at)
VALUES ($1, $2, $3, coalesce($4::timestamptz, now()))
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id, received_at;

-- name: inbox_get
SELECT event_id, job_id, payload_digest, received_at
FROM execution_inbox WHERE event_id = $1;

-- name: job_signal_runnable
-- Wake drivers (LISTEN fenceline_runnable) when the inbox transaction commits.
SELECT pg_notify('fenceline_runnable', $1::uuid::text);

-- name: job_scan_due
-- The durable scheduler's scan: due runnable jobs (a wake-up is owed), the next
-- time a waiting job becomes due (so a RETRY_SCHEDULED job is not left until the
-- next interval), and the inbox backlog — acknowledged through the broker but
-- not yet claimed, which a healthy, empty queue can hide.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t)
SELECT
  count(*) FILTER (WHERE j.available_at <= now_.t) AS due,
  extract(epoch FROM min(j.available_at) FILTER (WHERE j.available_at > now_.t) - now_.t)
    AS next_due_in_seconds,
  count(i.event_id) FILTER (WHERE j.available_at <= now_.t) AS inbox_backlog,
  greatest(0, coalesce(extract(epoch FROM now_.t - min(i.received_at)
                                 FILTER (WHERE j.available_at <= now_.t)), 0))
    AS inbox_oldest_seconds
FROM now_
LEFT JOIN extraction_jobs j
  ON j.state IN ('READY', 'RETRY_SCHEDULED') AND j.deadline_at > now_.t
LEFT JOIN LATERAL (
  SELECT x.event_id, x.received_at FROM execution_inbox x
  WHERE x.job_id = j.id ORDER BY x.received_at LIMIT 1
) i ON true
GROUP BY now_.t;
