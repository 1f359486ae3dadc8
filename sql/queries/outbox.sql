-- Outbox relay queries. A claim is one short statement (its own transaction):
-- no transaction stays open while the relay waits for the broker. Every later
-- write is conditional on `published_at IS NULL`; callers compare row counts.
--
-- The writes that name their events by id call functions of migration 022, which
-- write one event at a time by its primary key: as one "event_id = ANY($1)"
-- statement, a plan cached while the table was small read the whole unpublished
-- backlog on every batch (tests/integration/test_batch_plans.py).

-- name: outbox_claim_batch
-- Bounded batch of unpublished events whose relay lease is free or expired.
-- SKIP LOCKED keeps concurrent relays off each other's rows; the lease
-- (claimed_until) keeps them off rows a relay is still publishing.
-- $1 now, $2 limit, $3 lease seconds.
WITH now_ AS (SELECT coalesce($1::timestamptz, now()) AS t),
picked AS (
  SELECT o.event_id
  FROM outbox_events o
  WHERE o.published_at IS NULL
    AND (o.claimed_until IS NULL OR o.claimed_until <= (SELECT t FROM now_))
  ORDER BY o.created_at, o.event_id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events o
SET claimed_until = now_.t + make_interval(secs => $3),
    publish_attempts = o.publish_attempts + 1
FROM picked, now_
WHERE o.event_id = picked.event_id
RETURNING o.event_id, o.job_id, o.event_type, o.payload, o.created_at, o.publish_attempts,
          o.claimed_until, o.traceparent;

-- name: outbox_mark_published
-- Only after the broker confirmed (via 'broker') or when handled locally
-- (via 'local'). An event another relay already marked is left alone; the
-- caller counts the rows it got back. $1 event ids, $2 via, $3 now.
SELECT outbox_mark_published($1::uuid[], $2::text, $3::timestamptz) AS event_id;

-- name: outbox_release_with_error
-- Not published (returned, nacked, or unknown outcome): keep the event, record
-- why, and let it be claimed again after $3 seconds. $1 ids, $2 error, $4 now,
-- $5 the claim's own claimed_until: an event whose lease ran out and that another
-- relay claimed since is that relay's to settle, so it is left alone.
SELECT outbox_release_with_error($1::uuid[], $2::text, $3::float8, $4::timestamptz,
                                 $5::timestamptz) AS event_id;

-- name: outbox_backlog_stats
-- Publication age: the alert signal for a stuck relay or an unroutable event.
SELECT count(*) AS unpublished,
       greatest(0, coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at)), 0))
         AS oldest_unpublished_seconds,
       count(*) FILTER (WHERE last_error IS NOT NULL) AS failing
FROM outbox_events
WHERE published_at IS NULL;
