-- Commercial acknowledgement of deliveries (issue 47, item 3).
--
-- A 2xx from the ERP says it received a delivery, not what the business made of
-- it. An endpoint may ask for acknowledgements (ack_window_seconds, off by
-- default): its ERP then POSTs a Standard-Webhooks-signed acknowledgement for
-- each delivery it received (accepted, rejected with a reason, or duplicate) to
-- POST /v1/deliveries/{id}/acknowledgement, signed with the endpoint's own keys
-- (pipeline/delivery/acknowledgements.py). A delivery created for such an
-- endpoint carries the window and an acknowledgement state of its own, apart
-- from the delivery state (which stays 'delivered' after the 2xx):
--
--   awaiting ──ack──► accepted | rejected | duplicate
--      └──window passed (overdue pass, one alert)──► overdue ──late ack──► accepted | rejected | duplicate
--
-- ack_due_at is set when the 2xx is recorded (delivered_at + window). The overdue
-- pass moves awaiting deliveries past it to overdue once: that move is the alert
-- (an endpoint event and a metric), so each delivery alerts at most once.
ALTER TABLE webhook_endpoints
  ADD COLUMN ack_window_seconds integer CHECK (ack_window_seconds BETWEEN 60 AND 2592000);

CREATE TABLE delivery_ack_transitions (
  from_state text NOT NULL,
  to_state   text NOT NULL,
  PRIMARY KEY (from_state, to_state)
);
INSERT INTO delivery_ack_transitions VALUES
  ('awaiting', 'accepted'), ('awaiting', 'rejected'), ('awaiting', 'duplicate'),
  ('awaiting', 'overdue'),
  ('overdue', 'accepted'), ('overdue', 'rejected'), ('overdue', 'duplicate');

ALTER TABLE deliveries
  ADD COLUMN ack_window_seconds integer,
  ADD COLUMN ack_state text CHECK (ack_state IN
    ('awaiting', 'overdue', 'accepted', 'rejected', 'duplicate')),
  ADD COLUMN ack_due_at timestamptz,
  ADD COLUMN ack_overdue_at timestamptz,
  ADD COLUMN acknowledged_at timestamptz,
  ADD COLUMN ack_reason text CHECK (length(ack_reason) <= 1000),
  ADD COLUMN ack_message_id text,
  ADD CONSTRAINT ack_state_exactly_when_window CHECK (
    (ack_state IS NULL) = (ack_window_seconds IS NULL)),
  ADD CONSTRAINT acknowledged_at_exactly_when_acknowledged CHECK (
    (acknowledged_at IS NOT NULL)
    = coalesce(ack_state IN ('accepted', 'rejected', 'duplicate'), false)),
  ADD CONSTRAINT overdue_at_when_overdue CHECK (
    ack_state IS DISTINCT FROM 'overdue' OR ack_overdue_at IS NOT NULL),
  ADD CONSTRAINT reason_when_rejected CHECK (
    ack_state IS DISTINCT FROM 'rejected' OR ack_reason IS NOT NULL);
-- The overdue pass: awaiting acknowledgements whose window ran out, oldest first.
CREATE INDEX deliveries_ack_due ON deliveries (ack_due_at, id)
  WHERE ack_state = 'awaiting' AND ack_due_at IS NOT NULL;

-- Every acknowledgement message that took effect, keyed by the endpoint and the
-- message's webhook-id: a repeat with the same digest is answered as before, a
-- repeat with another digest is refused. effect: 'recorded' settled the delivery;
-- 'repeated' (another message id) agreed with what an earlier one recorded.
CREATE TABLE delivery_acknowledgements (
  endpoint_id       uuid NOT NULL REFERENCES webhook_endpoints(id),
  message_id        text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 256),
  delivery_id       uuid NOT NULL REFERENCES deliveries(id),
  tenant_id         uuid NOT NULL REFERENCES tenants(id),
  outcome           text NOT NULL CHECK (outcome IN ('accepted', 'rejected', 'duplicate')),
  reason            text CHECK (length(reason) <= 1000),
  body_sha256       text NOT NULL CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
  signed_timestamp  bigint NOT NULL,
  key_id            text,
  effect            text NOT NULL CHECK (effect IN ('recorded', 'repeated')),
  received_at       timestamptz NOT NULL,
  PRIMARY KEY (endpoint_id, message_id)
);
CREATE INDEX delivery_acknowledgements_delivery
  ON delivery_acknowledgements (delivery_id, received_at);

-- The endpoint log records each overdue acknowledgement (the alert).
ALTER TABLE endpoint_events DROP CONSTRAINT endpoint_events_kind_check;
ALTER TABLE endpoint_events ADD CONSTRAINT endpoint_events_kind_check CHECK (kind IN
  ('registered', 'rotated', 'disabled', 'enabled', 'breaker_opened', 'breaker_closed',
   'auth_alert', 'egress_blocked', 'redriven', 'verified', 'verification_failed',
   'url_changed', 'ack_overdue', 'ack_window_changed'));

-- deliveries_guard of migration 032, with the acknowledgement state machine: a
-- change of ack_state must be a row of delivery_ack_transitions (a delivery that
-- expects no acknowledgement never gets one), and the window a delivery was
-- created with never changes.
CREATE OR REPLACE FUNCTION deliveries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT EXISTS (
       SELECT 1 FROM delivery_state_transitions
       WHERE from_state = OLD.state AND to_state = NEW.state) THEN
    RAISE EXCEPTION 'illegal delivery transition % -> % for %', OLD.state, NEW.state, OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.ack_state IS DISTINCT FROM OLD.ack_state AND NOT EXISTS (
       SELECT 1 FROM delivery_ack_transitions
       WHERE from_state = OLD.ack_state AND to_state = NEW.ack_state) THEN
    RAISE EXCEPTION 'illegal acknowledgement transition % -> % for %',
      OLD.ack_state, NEW.ack_state, OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.ack_window_seconds IS DISTINCT FROM OLD.ack_window_seconds THEN
    RAISE EXCEPTION 'delivery % acknowledgement window is immutable', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.fence < OLD.fence OR NEW.attempts < OLD.attempts THEN
    RAISE EXCEPTION 'fence or attempts of delivery % would decrease', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.body_sha256 <> OLD.body_sha256
     OR (NEW.body IS DISTINCT FROM OLD.body AND NEW.body <> '\x'::bytea) THEN
    RAISE EXCEPTION 'delivery % id and body are immutable', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.body = '\x'::bytea AND NEW.state IS DISTINCT FROM OLD.state
     AND NEW.state IN ('pending', 'in_flight') THEN
    RAISE EXCEPTION 'delivery % was erased: it is never sent', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END $$;
