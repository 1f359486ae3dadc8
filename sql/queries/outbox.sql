-- Outbox relay queries. A claim is one short statement (its own transaction):
-- no transaction stays open while the relay waits for the broker. Every later
-- write is conditional on `published_at IS NULL`; callers compare row counts.

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
UPDATE outbox_events
SET published_at = coalesce($3::timestamptz, now()), published_via = $2,
    claimed_until = NULL, last_error = NULL
WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL
RETURNING event_id;

-- name: outbox_release_with_error
-- Not published (returned, nacked, or unknown outcome): keep the event, record
-- why, and let it be claimed again after $3 seconds. $1 ids, $2 error, $4 now,
-- $5 the claim's own claimed_until: an event whose lease ran out and that another
-- relay claimed since is that relay's to settle, so it is left alone.
UPDATE outbox_events
SET claimed_until = coalesce($4::timestamptz, now()) + make_interval(secs => $3),
    last_error = $2
WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL AND claimed_until = $5
RETURNING event_id;

-- name: outbox_backlog_stats
-- Publication age: the alert signal for a stuck relay or an unroutable event.
SELECT count(*) AS unpublished,
       greatest(0, coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(created_at)), 0))
         AS oldest_unpublished_seconds,
       count(*) FILTER (WHERE last_error IS NOT NULL) AS failing
FROM outbox_events
WHERE published_at IS NULL;
