-- The tenant's delivery log (issue 47, item 6): resend one delivery, send a test event.
--
-- A resend is a new attempt of the SAME delivery: the same id (the webhook-id the
-- ERP deduplicates on) and the same body bytes, so the ERP answers it as a duplicate
-- and posts nothing twice. A delivered delivery may therefore go back to pending;
-- failed and abandoned ones already could (redrive). The body guard of migration
-- 032 still holds: a delivery whose body erasure or retention emptied never goes
-- back to pending, so nothing resends an empty body.
INSERT INTO delivery_state_transitions VALUES ('delivered', 'pending');

-- The endpoint log records each resend (with the delivery id and the key) and each
-- test event sent to the endpoint (its webhook-id and the answer); the kinds of
-- migration 035 (acknowledgements) stay.
ALTER TABLE endpoint_events DROP CONSTRAINT endpoint_events_kind_check;
ALTER TABLE endpoint_events ADD CONSTRAINT endpoint_events_kind_check CHECK (kind IN
  ('registered', 'rotated', 'disabled', 'enabled', 'breaker_opened', 'breaker_closed',
   'auth_alert', 'egress_blocked', 'redriven', 'verified', 'verification_failed',
   'url_changed', 'ack_overdue', 'ack_window_changed', 'resent', 'tested'));
