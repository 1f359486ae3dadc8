-- Verified webhook endpoints (issue 47, item 4).
--
-- An endpoint receives deliveries only once it has proved it is controlled by
-- whoever registered it: Fenceline POSTs a challenge (a Standard-Webhooks-signed
-- request carrying a random token, pipeline/delivery/verification.py) and the
-- endpoint must answer 2xx echoing the token. Until then its deliveries are
-- held: they stay pending, never attempted, never failed. A URL change sets the
-- endpoint back to pending. Endpoints registered before this migration start
-- pending too, and are challenged on the dispatcher's next pass.
--
-- next_challenge_at is when a dispatcher may challenge a pending endpoint next:
-- at registration or URL change, pushed out while one challenges it (a lease),
-- and backed off after each failed challenge (challenge_failures).
ALTER TABLE webhook_endpoints
  ADD COLUMN verification text NOT NULL DEFAULT 'pending'
    CHECK (verification IN ('pending', 'verified')),
  ADD COLUMN verified_at timestamptz,
  ADD COLUMN challenge_failures integer NOT NULL DEFAULT 0 CHECK (challenge_failures >= 0),
  ADD COLUMN next_challenge_at timestamptz NOT NULL DEFAULT now(),
  ADD CONSTRAINT verified_at_exactly_when_verified CHECK (
    (verification = 'verified') = (verified_at IS NOT NULL));
CREATE INDEX webhook_endpoints_challenge_due ON webhook_endpoints (next_challenge_at, id)
  WHERE verification = 'pending' AND state = 'active';

-- The endpoint log records each challenge's outcome and each URL change.
ALTER TABLE endpoint_events DROP CONSTRAINT endpoint_events_kind_check;
ALTER TABLE endpoint_events ADD CONSTRAINT endpoint_events_kind_check CHECK (kind IN
  ('registered', 'rotated', 'disabled', 'enabled', 'breaker_opened', 'breaker_closed',
   'auth_alert', 'egress_blocked', 'redriven', 'verified', 'verification_failed',
   'url_changed'));
