-- ERP delivery (spec section 5, issue 8): webhook endpoints and their signing
-- keys, the delivery state machine with its attempt history and operational
-- events. The reference ERP receiver's tables are not the product's: sql/erp/.
--
-- Secrets at rest: a Standard Webhooks secret must be recoverable to sign, so it
-- cannot be hashed like an API key. webhook_endpoint_keys.sealed_secret holds it
-- sealed with AES-256-GCM under a key-encryption key from the settings
-- (FENCELINE_WEBHOOK_SECRET_KEY), with the endpoint id and key id as associated
-- data so a sealed value cannot be moved to another row. The format is
-- 'v1:<kek id>:<base64 nonce>:<base64 ciphertext>'. Without a configured key the
-- value is 'plain:<secret>' and every process that opens one logs a warning: a
-- development mode, never production (see docs/delivery.md).

CREATE TABLE webhook_endpoints (
  id                    uuid PRIMARY KEY,
  tenant_id             uuid NOT NULL REFERENCES tenants(id),
  url                   text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  description           text,
  -- Event types delivered here; an empty array means every type.
  event_types           text[] NOT NULL DEFAULT ARRAY['extraction.completed.v1'],
  state                 text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'disabled')),
  disabled_reason       text,
  disabled_at           timestamptz,
  -- Circuit breaker, shared by every dispatcher: 'open' until breaker_open_until,
  -- then half-open (one probe at a time) until a success closes it.
  breaker_state         text NOT NULL DEFAULT 'closed' CHECK (breaker_state IN ('closed', 'open')),
  breaker_open_until    timestamptz,
  consecutive_failures  integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
  auth_failures         integer NOT NULL DEFAULT 0 CHECK (auth_failures >= 0),
  failing_since         timestamptz,         -- first failure since the last success
  last_success_at       timestamptz,
  last_failure_at       timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT reason_exactly_when_disabled CHECK (
    (state = 'disabled') = (disabled_reason IS NOT NULL AND disabled_at IS NOT NULL)),
  CONSTRAINT open_until_exactly_when_open CHECK (
    (breaker_state = 'open') = (breaker_open_until IS NOT NULL))
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, created_at, id);

-- Signing keys: exactly one current key per endpoint; a rotated-out key keeps
-- signing (second signature) until expires_at, the end of its grace period.
CREATE TABLE webhook_endpoint_keys (
  endpoint_id    uuid NOT NULL REFERENCES webhook_endpoints(id),
  key_id         text NOT NULL CHECK (key_id ~ '^[a-z0-9_-]{1,64}$'),
  sealed_secret  text NOT NULL,
  created_at     timestamptz NOT NULL,
  retired_at     timestamptz,
  expires_at     timestamptz,
  PRIMARY KEY (endpoint_id, key_id),
  CONSTRAINT expiry_exactly_when_retired CHECK ((retired_at IS NULL) = (expires_at IS NULL))
);
CREATE UNIQUE INDEX webhook_endpoint_keys_one_current ON webhook_endpoint_keys (endpoint_id)
  WHERE retired_at IS NULL;

-- Operational events of an endpoint: the audit trail operators and alerts read.
CREATE TABLE endpoint_events (
  seq          bigserial PRIMARY KEY,
  endpoint_id  uuid NOT NULL REFERENCES webhook_endpoints(id),
  tenant_id    uuid NOT NULL REFERENCES tenants(id),
  kind         text NOT NULL CHECK (kind IN
                 ('registered', 'rotated', 'disabled', 'enabled', 'breaker_opened',
                  'breaker_closed', 'auth_alert', 'egress_blocked', 'redriven')),
  detail       text,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoint_events_endpoint ON endpoint_events (endpoint_id, seq);

CREATE TABLE delivery_state_transitions (
  from_state text NOT NULL,
  to_state   text NOT NULL,
  PRIMARY KEY (from_state, to_state)
);
INSERT INTO delivery_state_transitions VALUES
  ('pending', 'in_flight'), ('pending', 'abandoned'),
  ('retry_scheduled', 'in_flight'), ('retry_scheduled', 'abandoned'),
  ('in_flight', 'delivered'), ('in_flight', 'retry_scheduled'),
  ('in_flight', 'failed'), ('in_flight', 'abandoned'),
  ('failed', 'pending'), ('abandoned', 'pending');

CREATE TABLE deliveries (
  id               uuid PRIMARY KEY,          -- webhook-id: the same on every retry
  tenant_id        uuid NOT NULL REFERENCES tenants(id),
  endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints(id),
  job_id           uuid NOT NULL REFERENCES extraction_jobs(id),
  event_type       text NOT NULL,
  body             bytea NOT NULL,            -- the exact bytes signed and sent on every attempt
  body_sha256      text NOT NULL CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
  state            text NOT NULL CHECK (state IN
                     ('pending', 'in_flight', 'delivered', 'retry_scheduled', 'failed',
                      'abandoned')),
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  fence            bigint NOT NULL DEFAULT 0,
  lease_until      timestamptz,
  lease_owner      text,
  next_attempt_at  timestamptz NOT NULL,
  horizon_start    timestamptz NOT NULL,      -- retries stop at horizon_start + max age
  last_status      integer,
  last_error       text,
  last_latency_ms  double precision,
  last_attempt_at  timestamptz,
  final_reason     text,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz,
  UNIQUE (endpoint_id, job_id, event_type),
  CONSTRAINT lease_exactly_when_in_flight CHECK (
    (lease_until IS NOT NULL) = (state = 'in_flight')),
  CONSTRAINT delivered_at_exactly_when_delivered CHECK (
    (delivered_at IS NOT NULL) = (state = 'delivered')),
  CONSTRAINT reason_when_given_up CHECK (
    state NOT IN ('failed', 'abandoned') OR final_reason IS NOT NULL)
);
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at, id)
  WHERE state IN ('pending', 'retry_scheduled');
CREATE INDEX deliveries_in_flight ON deliveries (endpoint_id, lease_until) WHERE state = 'in_flight';
CREATE INDEX deliveries_job ON deliveries (job_id);
CREATE INDEX deliveries_tenant_created ON deliveries (tenant_id, created_at DESC, id);

CREATE FUNCTION deliveries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT EXISTS (
       SELECT 1 FROM delivery_state_transitions
       WHERE from_state = OLD.state AND to_state = NEW.state) THEN
    RAISE EXCEPTION 'illegal delivery transition % -> % for %', OLD.state, NEW.state, OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.fence < OLD.fence OR NEW.attempts < OLD.attempts THEN
    RAISE EXCEPTION 'fence or attempts of delivery % would decrease', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.body IS DISTINCT FROM OLD.body OR NEW.id <> OLD.id THEN
    RAISE EXCEPTION 'delivery % id and body are immutable', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END $$;

CREATE TRIGGER deliveries_guard BEFORE UPDATE ON deliveries
  FOR EACH ROW EXECUTE FUNCTION deliveries_guard();

-- One row per attempt (= per fence under which a dispatcher held the delivery).
CREATE TABLE delivery_attempts (
  delivery_id       uuid NOT NULL REFERENCES deliveries(id),
  fence             bigint NOT NULL,
  attempt           integer NOT NULL,
  worker_id         text NOT NULL,
  started_at        timestamptz NOT NULL,
  ended_at          timestamptz,
  outcome           text NOT NULL DEFAULT 'running' CHECK (outcome IN
                      ('running', 'delivered', 'retry_scheduled', 'failed', 'abandoned',
                       'lease_expired')),
  http_status       integer,
  error_class       text,
  error             text,
  latency_ms        double precision,
  signed_timestamp  bigint,                   -- webhook-timestamp of this attempt
  key_ids           text[],                   -- the keys whose signatures were sent
  address           text,                     -- the checked address the request went to
  next_attempt_at   timestamptz,              -- the retry decision taken after this attempt
  PRIMARY KEY (delivery_id, fence)
);
