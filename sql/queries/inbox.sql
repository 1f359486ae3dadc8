-- Ingress consumer and durable scheduler queries. The inbox transaction never
-- changes a job's state: acceptance already made it READY, and a redelivery must
-- not reset a RUNNING or settled job.

-- name: inbox_record
-- The whole inbox transaction as one statement (one round trip, atomic): insert
-- the record if the event id is new and the job exists, notify the scheduler if
-- the job is waiting to run, and report what was there before. Every part reads
-- the statement's snapshot, so `existing_*` is the row committed *before* this
-- statement (NULL when this statement inserted it). A concurrent insert of the
-- same event id that commits after the snapshot makes `inserted` false with no
-- existing row: the caller re-reads with inbox_get.
-- $1 event id, $2 job id, $3 payload digest, $4 now.
WITH job AS (
  SELECT id, state FROM extraction_jobs WHERE id = $2
),
ins AS (
  INSERT INTO execution_inbox (event_id, job_id, payload_digest, received_at)
  SELECT $1, job.id, $3, coalesce($4::timestamptz, now()) FROM job
  ON CONFLICT (event_id) DO NOTHING
  RETURNING event_id
),
signal AS (
  SELECT pg_notify('fenceline_runnable', job.id::text)
  FROM job, ins WHERE job.state IN ('READY', 'RETRY_SCHEDULED')
)
SELECT (SELECT state FROM job) AS job_state,
       EXISTS (SELECT 1 FROM ins) AS inserted,
       (SELECT count(*) FROM signal) AS signalled,
       x.job_id AS existing_job_id,
       x.payload_digest AS existing_digest
FROM (SELECT 1) one
LEFT JOIN execution_inbox x ON x.event_id = $1;

-- name: inbox_get
SELECT event_id, job_id, payload_digest, received_at
FROM execution_inbox WHERE event_id = $1;

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
