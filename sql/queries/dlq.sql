-- Dead-letter archive: written by the DLQ consumer before it acks, read by the
-- operator commands, replayed through the outbox with an audit row.

-- name: dead_letter_insert_if_new
-- $1 id, $2 dedupe key, $3 source, $4 reason, $5 detail, $6 message id, $7 event id,
-- $8 event type, $9 job id, $10 routing key, $11 headers, $12 body, $13 truncated, $14 now.
INSERT INTO dead_letters (id, dedupe_key, source, reason, detail, message_id, event_id,
                          event_type, job_id, tenant_id, routing_key, headers, body,
                          body_truncated, archived_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
        (SELECT tenant_id FROM extraction_jobs WHERE id = $9),
        $10, $11, $12, $13, coalesce($14::timestamptz, now()))
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id;

-- name: dead_letter_list
-- Operator view, newest first; $1 tenant filter (NULL = all, operator scope),
-- $2 reason filter (NULL = all), $3 limit.
SELECT id, source, reason, detail, message_id, event_id, event_type, job_id, tenant_id,
       routing_key, archived_at, replay_count, last_replayed_at
FROM dead_letters
WHERE ($1::uuid IS NULL OR tenant_id = $1)
  AND ($2::text IS NULL OR reason = $2)
ORDER BY archived_at DESC, id
LIMIT $3;

-- name: dead_letter_get
-- $2 tenant filter (NULL = operator scope): another tenant's letter is not found.
SELECT id, dedupe_key, source, reason, detail, message_id, event_id, event_type, job_id,
       tenant_id, routing_key, headers, body, body_truncated, archived_at, replay_count,
       last_replayed_at
FROM dead_letters
WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2);

-- name: dead_letter_lock
SELECT id, job_id, tenant_id, reason, replay_count
FROM dead_letters
WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)
FOR UPDATE;

-- name: dead_letter_job_lock
-- The replayed job must still be waiting to run; locked so a claim or the reaper
-- cannot settle it between this check and the commit.
SELECT id, tenant_id, state, schema_version
FROM extraction_jobs WHERE id = $1
FOR UPDATE;

-- name: dead_letter_mark_replayed
UPDATE dead_letters
SET replay_count = replay_count + 1, last_replayed_at = coalesce($2::timestamptz, now())
WHERE id = $1
RETURNING replay_count;

-- name: dead_letter_replay_insert
INSERT INTO dead_letter_replays (id, dead_letter_id, outbox_event_id, job_id, requested_by,
                                 note, created_at)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::timestamptz, now()));

-- name: dead_letter_replay_list
SELECT id, outbox_event_id, job_id, requested_by, note, created_at
FROM dead_letter_replays WHERE dead_letter_id = $1 ORDER BY created_at, id;

-- name: dead_letter_pending_count
-- DLQ depth on the archive side: letters nobody has replayed yet.
SELECT count(*) FROM dead_letters WHERE replay_count = 0;

-- name: dead_letter_backlog_stats
-- Dead letters archived and not replayed: how many and the oldest one's age.
SELECT count(*) AS waiting,
       coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(archived_at)), 0)
         AS oldest_seconds
FROM dead_letters WHERE replay_count = 0;

-- name: dead_letter_purge_archived_before
-- DLQ retention: letters archived before $1, at most $2 per call, with their
-- replay audit rows. Returns the ids deleted.
WITH doomed AS (
  SELECT id FROM dead_letters WHERE archived_at < $1
  ORDER BY archived_at, id LIMIT $2
  FOR UPDATE SKIP LOCKED
),
replays AS (
  DELETE FROM dead_letter_replays r USING doomed WHERE r.dead_letter_id = doomed.id
)
DELETE FROM dead_letters l USING doomed WHERE l.id = doomed.id
RETURNING l.id;
