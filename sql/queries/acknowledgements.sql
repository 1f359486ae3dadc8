-- Commercial acknowledgements of deliveries (migration 035): what the ERP made of
-- a delivery after its 2xx. Every change of ack_state is conditional on the state
-- it leaves; callers check the row count.

-- name: delivery_ack_target
-- The delivery an acknowledgement names, and the endpoint whose keys must have
-- signed it. System read: the signature, not a tenant key, authenticates the caller.
SELECT id, tenant_id, endpoint_id
FROM deliveries WHERE id = $1;

-- name: delivery_ack_lock
-- Serialises the acknowledgements of one delivery (a repeat and its original, or
-- two conflicting ones) on the delivery row.
SELECT id, tenant_id, endpoint_id, state, attempts, ack_state, ack_reason, ack_due_at,
       ack_overdue_at, acknowledged_at, ack_message_id
FROM deliveries WHERE id = $1
FOR UPDATE;

-- name: delivery_ack_message_get
SELECT delivery_id, outcome, reason, body_sha256, effect, received_at
FROM delivery_acknowledgements WHERE endpoint_id = $1 AND message_id = $2;

-- name: delivery_ack_record_if_awaited
-- The first acknowledgement settles the delivery's acknowledgement state: $2 is
-- 'accepted', 'rejected' or 'duplicate'; from 'awaiting', or late from 'overdue'.
UPDATE deliveries
SET ack_state = $2, ack_reason = $3, ack_message_id = $4,
    acknowledged_at = coalesce($5::timestamptz, now())
WHERE id = $1 AND ack_state IN ('awaiting', 'overdue')
  AND $2 IN ('accepted', 'rejected', 'duplicate')
RETURNING ack_state, ack_reason, ack_due_at, ack_overdue_at, acknowledged_at;

-- name: delivery_ack_message_insert
INSERT INTO delivery_acknowledgements (endpoint_id, message_id, delivery_id, tenant_id, outcome,
                                       reason, body_sha256, signed_timestamp, key_id, effect,
                                       received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11::timestamptz, now()))
RETURNING message_id;

-- name: delivery_ack_mark_overdue
-- The overdue pass: awaiting acknowledgements whose window ran out by $1 (now),
-- at most $2, become 'overdue' once, each with an 'ack_overdue' endpoint event:
-- the alert. A delivery leaves 'awaiting' once, so it alerts once. Returns how
-- many were locked, marked and logged (the caller checks they agree).
WITH due AS (
  SELECT id FROM deliveries
  WHERE ack_state = 'awaiting' AND ack_due_at <= coalesce($1::timestamptz, now())
  ORDER BY ack_due_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
marked AS (
  UPDATE deliveries d
  SET ack_state = 'overdue', ack_overdue_at = coalesce($1::timestamptz, now())
  FROM due
  WHERE d.id = due.id AND d.ack_state = 'awaiting'
  RETURNING d.id, d.tenant_id, d.endpoint_id, d.job_id, d.ack_due_at
),
logged AS (
  INSERT INTO endpoint_events (endpoint_id, tenant_id, kind, detail, created_at)
  SELECT endpoint_id, tenant_id, 'ack_overdue',
         'delivery ' || id || ' (job ' || job_id || '): no acknowledgement by '
           || to_char(ack_due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
         coalesce($1::timestamptz, now())
  FROM marked
  RETURNING seq
)
SELECT (SELECT count(*) FROM due) AS locked, (SELECT count(*) FROM marked) AS marked,
       (SELECT count(*) FROM logged) AS logged;

-- name: delivery_ack_list_for_tenant
-- The acknowledgement messages of one of the tenant's deliveries, oldest first.
SELECT a.message_id, a.outcome, a.reason, a.effect, a.key_id, a.signed_timestamp,
       a.received_at
FROM delivery_acknowledgements a
WHERE a.delivery_id = $1 AND a.tenant_id = $2
ORDER BY a.received_at, a.message_id;

-- name: dashboard_acknowledgements_for_tenant
-- The tenant's deliveries by acknowledgement state (those that expect one).
SELECT ack_state, count(*) AS deliveries
FROM deliveries WHERE tenant_id = $1 AND ack_state IS NOT NULL
GROUP BY ack_state ORDER BY ack_state;

-- name: delivery_ack_transition_list
SELECT from_state, to_state FROM delivery_ack_transitions ORDER BY 1, 2;
