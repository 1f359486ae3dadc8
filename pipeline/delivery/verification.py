"""Endpoint verification: an endpoint receives deliveries only after it echoes a challenge.

Registering a URL proves nothing about who controls it. So a new endpoint (and one
whose URL changed) is ``pending``: its deliveries are created and held (pending, never
attempted, never failed) until a challenge succeeds. The challenge is one POST to the
endpoint's URL, through the same :class:`~pipeline.delivery.egress_client.EgressClient`
(SSRF guard, pinned address, no redirects) and signed with the endpoint's keys exactly
as a delivery is (Standard Webhooks headers, ``webhook-id`` ``vrf_…``)::

    {"type": "endpoint.verification.v1", "timestamp": "...",
     "data": {"endpoint_id": "...", "challenge": "<32 random bytes, base64url>"}}

The endpoint must answer 2xx with the JSON object ``{"challenge": "<the same token>"}``.
Anything else (another token, another status, no answer, a blocked address) is a failed
challenge: the endpoint stays pending and is challenged again after a back-off.

Invariants:

* The token is fresh per challenge and never stored; it is compared with
  :func:`hmac.compare_digest`.
* Verifying is conditional on the URL the challenge went to
  (``endpoint_verify_if_pending``): an echo from the old URL never verifies a new one.
* Two challengers never challenge one endpoint at once: each leases it first by
  pushing ``next_challenge_at`` out (``endpoint_claim_challenge_due``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.delivery.egress_client import EgressClient, HttpOutcome
from pipeline.delivery.endpoints import SecretBox, signing_keys
from pipeline.delivery.signing import webhook_headers
from pipeline.queries import q

log = logging.getLogger(__name__)

#: The event type of a challenge; a receiver answers it with the echo, never posts it.
EVENT_VERIFICATION = "endpoint.verification.v1"
#: The ``webhook-id`` of a challenge starts so (a delivery's is its uuid).
CHALLENGE_ID_PREFIX = "vrf_"
#: How long a challenger holds a pending endpoint (longer than one POST may take).
CHALLENGE_LEASE_SECONDS = 60.0
#: Back-off after the n-th failed challenge in a row: base × 2^(n-1), capped.
CHALLENGE_RETRY_BASE_SECONDS = 30.0
CHALLENGE_RETRY_CAP_SECONDS = 3600.0


@dataclass(frozen=True)
class ChallengeResult:
    """One challenge's outcome: ``verified``, or why not (``wrong_echo``, ``http_<status>``,
    an egress error class such as ``egress_blocked`` or ``timeout``, ``signing``, or
    ``not_pending``: the URL changed, or the endpoint was disabled, meanwhile)."""

    endpoint_id: uuid.UUID
    verified: bool
    reason: str
    detail: str = ""


def challenge_body(endpoint_id: uuid.UUID, token: str, now: datetime) -> bytes:
    """The bytes of a challenge request (compact JSON, as deliveries are)."""
    event = {
        "type": EVENT_VERIFICATION,
        "timestamp": now.isoformat(),
        "data": {"endpoint_id": str(endpoint_id), "challenge": token},
    }
    return json.dumps(event, separators=(",", ":")).encode()


def echoed(outcome: HttpOutcome, token: str) -> tuple[bool, str]:
    """Whether an answer echoes ``token``: 2xx and ``{"challenge": token}``; else why not."""
    if outcome.status is None:
        return False, outcome.error_class or "no_response"
    if not 200 <= outcome.status < 300:
        return False, f"http_{outcome.status}"
    try:
        answer = json.loads(outcome.body_excerpt)
    except (ValueError, UnicodeDecodeError):
        return False, "wrong_echo"
    presented = answer.get("challenge") if isinstance(answer, dict) else None
    if not isinstance(presented, str) or not presented.isascii():
        return False, "wrong_echo"
    ok = hmac.compare_digest(presented.encode(), token.encode())
    return ok, "verified" if ok else "wrong_echo"


class EndpointChallenger:
    """Sends challenges and records their outcomes (the dispatcher's and the API's).

    Args:
        pool: the Fenceline database.
        client: the guarded HTTP client deliveries use.
        box: opens sealed endpoint secrets (the challenge is signed like a delivery).
        clock: injectable time (None → the database's ``now()`` and wall time).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        client: EgressClient,
        box: SecretBox,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.pool = pool
        self.client = client
        self.box = box
        self.clock = clock or DatabaseClock()

    async def run_due(self, limit: int = 10) -> list[ChallengeResult]:
        """Challenge up to ``limit`` pending endpoints that are due, concurrently."""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                q("endpoint_claim_challenge_due"),
                self.clock.now(),
                limit,
                CHALLENGE_LEASE_SECONDS,
            )
        challenges = (self._challenge(r["id"], r["tenant_id"], r["url"]) for r in rows)
        return list(await asyncio.gather(*challenges))

    async def verify(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> ChallengeResult | None:
        """Challenge the tenant's pending endpoint now; None when it is not pending
        (verified already, disabled, another tenant's, or being challenged)."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                q("endpoint_lease_challenge_for_tenant"),
                endpoint_id,
                tenant_id,
                CHALLENGE_LEASE_SECONDS,
                self.clock.now(),
            )
        if row is None:
            return None
        return await self._challenge(row["id"], row["tenant_id"], row["url"])

    async def _challenge(
        self, endpoint_id: uuid.UUID, tenant_id: uuid.UUID, url: str
    ) -> ChallengeResult:
        token = secrets.token_urlsafe(32)
        wall = self.clock.now() or datetime.now(UTC)
        body = challenge_body(endpoint_id, token, wall)
        try:
            async with self.pool.acquire() as conn:
                keys = await signing_keys(conn, self.box, endpoint_id, self.clock.now())
        except ValueError as exc:  # a secret sealed under a key not configured
            keys, sealed_error = [], f"{type(exc).__name__}: {exc}"
        else:
            sealed_error = "endpoint has no signing key"
        if not keys:
            result = ChallengeResult(endpoint_id, False, "signing", sealed_error)
        else:
            msg_id = f"{CHALLENGE_ID_PREFIX}{uuid.uuid4().hex}"
            headers = webhook_headers([k.secret for k in keys], msg_id, int(wall.timestamp()), body)
            outcome = await self.client.post(url, body, headers)
            ok, reason = echoed(outcome, token)
            result = ChallengeResult(endpoint_id, ok, reason, outcome.error or "")
        return await self._record(tenant_id, url, result)

    async def _record(
        self, tenant_id: uuid.UUID, url: str, result: ChallengeResult
    ) -> ChallengeResult:
        """Commit the outcome, conditional on the endpoint still pending at ``url``."""
        now = self.clock.now()
        eid = result.endpoint_id
        async with self.pool.acquire() as conn, conn.transaction():
            if result.verified:
                if await conn.fetchval(q("endpoint_verify_if_pending"), eid, url, now) is None:
                    return ChallengeResult(eid, False, "not_pending")
                await conn.execute(q("endpoint_event_insert"), eid, tenant_id, "verified", url, now)
                log.info("endpoint %s verified", eid)
                return result
            failed = await conn.fetchrow(
                q("endpoint_challenge_failed_if_pending"),
                eid,
                url,
                now,
                CHALLENGE_RETRY_BASE_SECONDS,
                CHALLENGE_RETRY_CAP_SECONDS,
            )
            if failed is None:
                return ChallengeResult(eid, False, "not_pending")
            next_at = failed["next_challenge_at"].isoformat()
            detail = f"{result.reason}; failure {failed['challenge_failures']}, next at {next_at}"
            await conn.execute(
                q("endpoint_event_insert"), eid, tenant_id, "verification_failed", detail, now
            )
        log.warning("endpoint %s challenge failed: %s", eid, result.reason)
        return result
