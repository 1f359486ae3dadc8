"""Test events: a signed ``endpoint.test.v1`` sent to a tenant's endpoint on request.

A tenant checks its receiver end to end (TLS, signature verification, its answer)
without waiting for an invoice. Invariants (``tests/integration/test_delivery_log.py``):

* It goes out exactly as a delivery does: the endpoint's registered URL only, through
  the same :class:`~pipeline.delivery.egress_client.EgressClient` (SSRF guard, pinned
  address, no redirects), signed with the endpoint's keys (Standard Webhooks headers,
  ``webhook-id`` ``tst_…``, a fresh id per test)::

      {"type": "endpoint.test.v1", "timestamp": "...",
       "data": {"endpoint_id": "...", "test": true}}

* It is **never an ERP posting**: it carries no job and no result, and it is no
  delivery (no row in ``deliveries``, no retry, no effect on the breaker). Only an
  active, verified endpoint is sent one: nothing goes to a URL before it echoed a
  challenge (:mod:`pipeline.delivery.verification`).
* Each test is an endpoint event (``tested``: its webhook-id and the answer).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_owned
from pipeline.delivery.egress_client import EgressClient
from pipeline.delivery.endpoints import SecretBox, signing_keys
from pipeline.delivery.signing import webhook_headers
from pipeline.errors import DeliveryRefused
from pipeline.queries import q

log = logging.getLogger(__name__)

#: The event type of a test event; a receiver answers it like any event it does not post.
EVENT_TEST = "endpoint.test.v1"
#: The ``webhook-id`` of a test event starts so (a delivery's is its uuid).
TEST_ID_PREFIX = "tst_"


@dataclass(frozen=True)
class ProbeResult:
    """What one test event got: ``delivered`` for a 2xx, else the status or error class."""

    endpoint_id: uuid.UUID
    webhook_id: str
    webhook_timestamp: int
    key_ids: tuple[str, ...]
    delivered: bool
    http_status: int | None
    latency_ms: float
    error_class: str | None


def probe_body(endpoint_id: uuid.UUID, now: datetime) -> bytes:
    """The bytes of a test event (compact JSON, as deliveries are)."""
    event = {
        "type": EVENT_TEST,
        "timestamp": now.isoformat(),
        "data": {"endpoint_id": str(endpoint_id), "test": True},
    }
    return json.dumps(event, separators=(",", ":")).encode()


class EndpointProbe:
    """Sends test events to a tenant's endpoints and records each in the endpoint log.

    Args:
        pool: the Fenceline database.
        client: the guarded HTTP client deliveries use.
        box: opens sealed endpoint secrets (a test is signed like a delivery).
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

    async def send(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> ProbeResult:
        """Send one test event to the tenant's endpoint now and answer what came back.

        Raises:
            NotFound: no such endpoint of this tenant.
            DeliveryRefused: the endpoint is disabled (``endpoint_disabled``) or not
                verified yet (``not_verified``); nothing was sent.
            ValueError: a signing secret cannot be opened with the configured key.
        """
        now = self.clock.now()
        async with self.pool.acquire() as conn:
            row = await fetch_owned(
                conn, "endpoint_get_for_tenant", endpoint_id, tenant_id, "endpoint"
            )
            if row["state"] != "active":
                raise DeliveryRefused(
                    "the endpoint is disabled; enable it first",
                    reason="endpoint_disabled",
                    state=row["state"],
                )
            if row["verification"] != "verified":
                raise DeliveryRefused(
                    "the endpoint has not echoed a verification challenge yet; verify it first",
                    reason="not_verified",
                    state=row["verification"],
                )
            keys = await signing_keys(conn, self.box, endpoint_id, now)
        if not keys:
            raise ValueError("endpoint has no signing key")
        wall = now or datetime.now(UTC)
        signed_at = int(wall.timestamp())
        webhook_id = f"{TEST_ID_PREFIX}{uuid.uuid4().hex}"
        body = probe_body(endpoint_id, wall)
        headers = webhook_headers([k.secret for k in keys], webhook_id, signed_at, body)
        outcome = await self.client.post(row["url"], body, headers)
        delivered = outcome.status is not None and 200 <= outcome.status < 300
        result = ProbeResult(
            endpoint_id=endpoint_id,
            webhook_id=webhook_id,
            webhook_timestamp=signed_at,
            key_ids=tuple(k.key_id for k in keys),
            delivered=delivered,
            http_status=outcome.status,
            latency_ms=outcome.latency_ms,
            error_class=None if delivered else outcome.error_class or f"http_{outcome.status}",
        )
        answer = f"HTTP {outcome.status}" if outcome.status is not None else result.error_class
        detail = f"{webhook_id}: {answer} in {outcome.latency_ms:.0f} ms"
        async with self.pool.acquire() as conn:
            await conn.execute(
                q("endpoint_event_insert"), endpoint_id, tenant_id, "tested", detail, now
            )
        log.info("endpoint %s test event %s: %s", endpoint_id, webhook_id, answer)
        return result
