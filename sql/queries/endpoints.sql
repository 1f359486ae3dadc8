-- Webhook endpoints: registration, signing keys, state, breaker and events.
-- Tenant-facing reads and writes take the tenant id; the dispatcher's system
-- queries (lock, record outcome, disable) take only the endpoint id.

-- name: endpoint_insert
-- A new endpoint is pending verification and due for its challenge at once.
INSERT INTO webhook_endpoints (id, tenant_id, url, description, event_types, created_at,
                               updated_at, next_challenge_at, ack_window_seconds)
VALUES ($1, $2, $3, $4, $5, coalesce($6::timestamptz, now()), coalesce($6::timestamptz, now()),
        coalesce($6::timestamptz, now()), $7)
RETURNING id, tenant_id, url, description, event_types, state, disabled_reason, disabled_at,
          breaker_state, breaker_open_until, consecutive_failures, failing_since,
          last_success_at, created_at, verification, verified_at, ack_window_seconds;

-- name: endpoint_key_insert
INSERT INTO webhook_endpoint_keys (endpoint_id, key_id, sealed_secret, created_at)
VALUES ($1, $2, $3, coalesce($4::timestamptz, now()))
RETURNING endpoint_id, key_id, created_at;

-- name: endpoint_get_for_tenant
SELECT id, tenant_id, url, description, event_types, state, disabled_reason, disabled_at,
       breaker_state, breaker_open_until, consecutive_failures, failing_since,
       last_success_at, created_at, verification, verified_at, ack_window_seconds
FROM webhook_endpoints WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2;

-- name: endpoint_list_for_tenant
SELECT id, tenant_id, url, description, event_types, state, disabled_reason, disabled_at,
       breaker_state, breaker_open_until, consecutive_failures, failing_since,
       last_success_at, created_at, verification, verified_at, ack_window_seconds
FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id;

-- name: endpoint_lock_for_tenant
SELECT id, tenant_id, url, state FROM webhook_endpoints
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2
FOR UPDATE;

-- name: endpoint_key_count
SELECT count(*) FROM webhook_endpoint_keys WHERE endpoint_id = $1;

-- name: endpoint_key_retire_current
-- Rotation: the current key keeps signing for $2 seconds (the grace period).
UPDATE webhook_endpoint_keys
SET retired_at = coalesce($3::timestamptz, now()),
    expires_at = coalesce($3::timestamptz, now()) + make_interval(secs => $2)
WHERE endpoint_id = $1 AND retired_at IS NULL
RETURNING key_id, expires_at;

-- name: endpoint_key_expire_retired
-- A second rotation inside a grace period ends the older retired key's grace now.
UPDATE webhook_endpoint_keys SET expires_at = coalesce($2::timestamptz, now())
WHERE endpoint_id = $1 AND retired_at IS NOT NULL
  AND expires_at > coalesce($2::timestamptz, now())
RETURNING key_id;

-- name: endpoint_key_list_for_signing
-- The current key first, then retired keys still inside their grace period.
SELECT key_id, sealed_secret, retired_at, expires_at
FROM webhook_endpoint_keys
WHERE endpoint_id = $1
  AND (retired_at IS NULL OR expires_at > coalesce($2::timestamptz, now()))
ORDER BY retired_at IS NOT NULL, created_at DESC;

-- name: endpoint_key_list_for_tenant
-- Key metadata only: sealed secrets never leave through a tenant read.
SELECT k.key_id, k.created_at, k.retired_at, k.expires_at
FROM webhook_endpoint_keys k JOIN webhook_endpoints e ON e.id = k.endpoint_id
WHERE k.endpoint_id = $1 AND e.tenant_id IS NOT DISTINCT FROM $2
ORDER BY k.created_at, k.key_id;

-- name: endpoint_lock
-- Dispatcher: serialise breaker and state decisions for one endpoint.
SELECT id, tenant_id, url, state, breaker_state, breaker_open_until, consecutive_failures,
       auth_failures, failing_since, coalesce($2::timestamptz, now()) AS now
FROM webhook_endpoints WHERE id = $1
FOR UPDATE;

-- name: endpoint_record_success
UPDATE webhook_endpoints
SET consecutive_failures = 0, auth_failures = 0, failing_since = NULL,
    breaker_state = 'closed', breaker_open_until = NULL,
    last_success_at = coalesce($2::timestamptz, now())
WHERE id = $1
RETURNING id;

-- name: endpoint_record_failure
-- Breaker values are computed by the dispatcher under endpoint_lock.
UPDATE webhook_endpoints
SET consecutive_failures = $2, auth_failures = $3, breaker_state = $4,
    breaker_open_until = $5, failing_since = coalesce(failing_since, $6::timestamptz, now()),
    last_failure_at = coalesce($6::timestamptz, now())
WHERE id = $1
RETURNING id, failing_since;

-- name: endpoint_disable_if_active
UPDATE webhook_endpoints
SET state = 'disabled', disabled_reason = $2, disabled_at = coalesce($3::timestamptz, now()),
    breaker_state = 'closed', breaker_open_until = NULL
WHERE id = $1 AND state = 'active'
RETURNING id, tenant_id;

-- name: endpoint_enable_if_disabled
-- Re-enabling starts from a clean breaker and failure streak.
UPDATE webhook_endpoints
SET state = 'active', disabled_reason = NULL, disabled_at = NULL, consecutive_failures = 0,
    auth_failures = 0, failing_since = NULL, breaker_state = 'closed', breaker_open_until = NULL
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 AND state IS NOT DISTINCT FROM 'disabled'
RETURNING id;

-- name: endpoint_event_insert
INSERT INTO endpoint_events (endpoint_id, tenant_id, kind, detail, created_at)
VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now()))
RETURNING seq;

-- name: endpoint_event_list_for_tenant
SELECT v.seq, v.kind, v.detail, v.created_at
FROM endpoint_events v JOIN webhook_endpoints e ON e.id = v.endpoint_id
WHERE v.endpoint_id = $1 AND e.tenant_id IS NOT DISTINCT FROM $2
ORDER BY v.seq;

-- name: endpoint_update_url_for_tenant
-- A new URL must be verified again: the endpoint goes back to pending, due for a
-- challenge at once; its held and future deliveries wait for that.
UPDATE webhook_endpoints
SET url = $3, verification = 'pending', verified_at = NULL, challenge_failures = 0,
    next_challenge_at = coalesce($4::timestamptz, now()),
    updated_at = coalesce($4::timestamptz, now())
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2
RETURNING id;

-- name: endpoint_claim_challenge_due
-- Pending active endpoints due for a challenge ($1 now, $2 limit), each leased for
-- $3 seconds (next_challenge_at pushed out) so two dispatchers never challenge one
-- endpoint at once. Returns the URL the challenge is for.
UPDATE webhook_endpoints e
SET next_challenge_at = coalesce($1::timestamptz, now()) + make_interval(secs => $3)
FROM (
  SELECT id FROM webhook_endpoints
  WHERE verification = 'pending' AND state = 'active'
    AND next_challenge_at <= coalesce($1::timestamptz, now())
  ORDER BY next_challenge_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
) due
WHERE e.id = due.id
RETURNING e.id, e.tenant_id, e.url;

-- name: endpoint_lease_challenge_for_tenant
-- An explicit verification (the API): lease the tenant's pending endpoint for $3
-- seconds, as endpoint_claim_challenge_due would. No row: not pending, disabled,
-- or another challenge holds it. (IS NOT DISTINCT FROM: a row named by its primary
-- key is read through it, not through the partial index of due challenges.)
UPDATE webhook_endpoints
SET next_challenge_at = coalesce($4::timestamptz, now()) + make_interval(secs => $3)
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2
  AND verification IS NOT DISTINCT FROM 'pending' AND state IS NOT DISTINCT FROM 'active'
RETURNING id, tenant_id, url;

-- name: endpoint_verify_if_pending
-- The endpoint echoed the challenge sent to URL $2: verified, unless its URL
-- changed meanwhile (then the echo proves nothing about the new one).
UPDATE webhook_endpoints
SET verification = 'verified', verified_at = coalesce($3::timestamptz, now()),
    challenge_failures = 0
WHERE id = $1 AND url = $2 AND verification = 'pending'
RETURNING id;

-- name: endpoint_challenge_failed_if_pending
-- A failed challenge of URL $2: count it and back off from $3 (now): $4 seconds
-- doubled per failure before this one, at most $5. Returns the count and when next.
UPDATE webhook_endpoints
SET challenge_failures = challenge_failures + 1,
    next_challenge_at = coalesce($3::timestamptz, now())
      + make_interval(secs => least($5::float8,
                                    $4::float8 * power(2, least(challenge_failures, 16))))
WHERE id = $1 AND url = $2 AND verification = 'pending'
RETURNING challenge_failures, next_challenge_at;

-- name: endpoint_set_ack_window_for_tenant
-- Acknowledgements asked for within $3 seconds of each 2xx (NULL: none). Deliveries
-- created from now on carry the new window; existing ones keep theirs.
UPDATE webhook_endpoints
SET ack_window_seconds = $3, updated_at = coalesce($4::timestamptz, now())
WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2
RETURNING id;
