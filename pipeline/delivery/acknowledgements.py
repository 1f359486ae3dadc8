"""Commercial acknowledgements: what the ERP made of a delivery after its 2xx.

A 2xx says the ERP received a delivery. An endpoint that asks for
acknowledgements (``ack_window_seconds``, off by default) also hears, later,
whether the business took it: the ERP POSTs a signed acknowledgement to
``POST /v1/deliveries/{id}/acknowledgement``::

    {"type": "delivery.acknowledgement.v1", "timestamp": "...",
     "data": {"delivery_id": "...", "outcome": "accepted" | "rejected" | "duplicate",
              "reason": "..."}}                       # reason required for "rejected"

Invariants (``tests/integration/test_delivery_acknowledgements.py``):

* **Signed by the endpoint**: Standard Webhooks headers, verified with the keys
  that sign the endpoint's deliveries (the current one and one still in its
  rotation grace), every comparison constant-time (:class:`Verifier`), the
  timestamp within :data:`DEFAULT_TOLERANCE_SECONDS` either way (replay window).
  An unknown delivery answers like a bad signature (401): the route is no
  oracle for delivery ids. The signature is checked over the raw bytes before
  the body is parsed. The body's ``type`` and ``delivery_id`` bind the message
  to this route: no event Fenceline itself signs has that type.
* **Idempotent on the message id** (``webhook-id``, per endpoint): the same
  message again answers what it answered first; the same id with another body is
  refused (409 ``message_conflict``). Another message with the outcome already
  recorded is taken as a repeat (``effect: repeated``); one with another outcome is
  refused (409 ``conflicting_acknowledgement``): the first acknowledgement stands.
* **Every change is conditional**: ``awaiting`` or ``overdue`` → the outcome,
  under the delivery's row lock, zero rows refused; the state machine is
  :data:`ACK_TRANSITIONS`, enforced again by ``deliveries_guard`` (migration 035).
* **One alert per missing acknowledgement**: :class:`OverdueAcknowledgements`
  (the maintenance actor) moves ``awaiting`` deliveries past ``ack_due_at`` to
  ``overdue`` once, each with an ``ack_overdue`` endpoint event and one count of
  ``fenceline_delivery_ack_overdue_total``. A late acknowledgement still settles it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import asyncpg
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from pipeline.clock import Clock, DatabaseClock
from pipeline.delivery.endpoints import SecretBox, signing_keys
from pipeline.delivery.signing import DEFAULT_TOLERANCE_SECONDS, VerificationKey, Verifier
from pipeline.errors import AcknowledgementRefused
from pipeline.periodic import PeriodicPass
from pipeline.queries import q

log = logging.getLogger(__name__)

#: The event type of an acknowledgement the ERP sends.
EVENT_ACKNOWLEDGEMENT = "delivery.acknowledgement.v1"
#: An acknowledgement is a small JSON object; anything larger is refused unread.
MAX_ACK_BODY_BYTES = 16 * 1024
MAX_REASON_LENGTH = 1000
#: The window an endpoint may ask for: one minute to thirty days (migration 035).
MIN_ACK_WINDOW_SECONDS = 60
MAX_ACK_WINDOW_SECONDS = 30 * 86400


class AckState(StrEnum):
    #: Created so (the endpoint asks for acknowledgements). Left by an
    #: acknowledgement, or by the overdue pass once ``ack_due_at`` passed.
    AWAITING = "awaiting"
    #: The window ran out (alerted once). Left only by a late acknowledgement.
    OVERDUE = "overdue"
    #: The ERP took the invoice. Final.
    ACCEPTED = "accepted"
    #: The ERP refused it, with a reason. Final.
    REJECTED = "rejected"
    #: The ERP already had it. Final.
    DUPLICATE = "duplicate"


#: What an ERP may answer.
OUTCOMES: tuple[str, ...] = (AckState.ACCEPTED, AckState.REJECTED, AckState.DUPLICATE)

ACK_TRANSITIONS: frozenset[tuple[AckState, AckState]] = frozenset(
    {(AckState.AWAITING, AckState(o)) for o in OUTCOMES}
    | {(AckState.AWAITING, AckState.OVERDUE)}
    | {(AckState.OVERDUE, AckState(o)) for o in OUTCOMES}
)


@dataclass(frozen=True)
class Acknowledgement:
    """A parsed acknowledgement body."""

    delivery_id: uuid.UUID
    outcome: str
    reason: str | None


@dataclass(frozen=True)
class AckReceipt:
    """What an acknowledgement did: the delivery's recorded outcome (the first
    acknowledgement's), whether it came after the window (``late``), and this
    message's effect (``recorded`` it, or ``repeated`` it)."""

    delivery_id: uuid.UUID
    outcome: str
    reason: str | None
    acknowledged_at: datetime
    late: bool
    effect: str


def _refuse(status: int, reason: str, message: str) -> AcknowledgementRefused:
    return AcknowledgementRefused(message, status=status, reason=reason)


def parse_acknowledgement(body: bytes, delivery_id: uuid.UUID) -> Acknowledgement:
    """The acknowledgement in ``body`` (already verified) of ``delivery_id``.

    Raises:
        AcknowledgementRefused: 400, not an acknowledgement of this delivery.
    """
    try:
        event = json.loads(body)
        data = event["data"]
        named = uuid.UUID(str(data["delivery_id"]))
        outcome = data["outcome"]
        reason = data.get("reason")
        kind = event["type"]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _refuse(400, "invalid", f"not an acknowledgement: {type(exc).__name__}") from None
    if kind != EVENT_ACKNOWLEDGEMENT:
        raise _refuse(400, "invalid", f"type must be {EVENT_ACKNOWLEDGEMENT}")
    if named != delivery_id:
        raise _refuse(400, "invalid", "the body names another delivery")
    if outcome not in OUTCOMES:
        raise _refuse(400, "invalid", f"outcome must be one of {list(OUTCOMES)}")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_LENGTH):
        raise _refuse(400, "invalid", f"reason must be a string of at most {MAX_REASON_LENGTH}")
    if outcome == AckState.REJECTED and not reason:
        raise _refuse(400, "invalid", "a rejection needs a reason")
    return Acknowledgement(named, str(outcome), reason or None)


class AckMetrics:
    """Acknowledgement series (bounded labels, no ids)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.received = Counter(
            "fenceline_delivery_acknowledgements",
            "ERP acknowledgements by outcome and effect (recorded, repeated, late) or refusal",
            ["outcome", "effect"],
            registry=r,
        )
        self.overdue = Counter(
            "fenceline_delivery_ack_overdue",
            "ALERT: deliveries whose acknowledgement did not arrive within the window "
            "(counted once per delivery)",
            registry=r,
        )


_default_metrics: AckMetrics | None = None


def default_ack_metrics() -> AckMetrics:
    """The process-wide instance on Prometheus' default registry (created once)."""
    global _default_metrics
    if _default_metrics is None:
        _default_metrics = AckMetrics()
    return _default_metrics


class AcknowledgementInbox:
    """Receives ERP acknowledgements: verify, then record once.

    Args:
        pool: the Fenceline database.
        box: opens the endpoint's sealed signing secrets.
        clock: injectable time (None → the database's ``now()`` and wall time).
        tolerance_seconds: the replay window, applied in both directions.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        box: SecretBox,
        *,
        clock: Clock | None = None,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        metrics: AckMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.box = box
        self.clock = clock or DatabaseClock()
        self.tolerance_seconds = tolerance_seconds
        self.metrics = metrics or default_ack_metrics()

    def _wall(self) -> float:
        now = self.clock.now()
        return now.timestamp() if now is not None else time.time()

    async def receive(
        self, delivery_id: uuid.UUID, headers: Mapping[str, str], body: bytes
    ) -> AckReceipt:
        """Verify and record one acknowledgement of ``delivery_id``.

        Raises:
            AcknowledgementRefused: see :class:`~pipeline.errors.AcknowledgementRefused`.
        """
        try:
            receipt = await self._receive(delivery_id, headers, body)
        except AcknowledgementRefused as exc:
            self.metrics.received.labels("refused", exc.reason).inc()
            raise
        effect = "late" if receipt.late and receipt.effect == "recorded" else receipt.effect
        self.metrics.received.labels(receipt.outcome, effect).inc()
        return receipt

    async def _receive(
        self, delivery_id: uuid.UUID, headers: Mapping[str, str], body: bytes
    ) -> AckReceipt:
        if len(body) > MAX_ACK_BODY_BYTES:
            raise _refuse(413, "too_large", f"an acknowledgement is at most {MAX_ACK_BODY_BYTES}")
        now = self.clock.now()
        async with self.pool.acquire() as conn:
            target = await conn.fetchrow(q("delivery_ack_target"), delivery_id)
            keys = [] if target is None else await self._keys(conn, target["endpoint_id"], now)
        if target is None or not keys:
            # The answer of a bad signature: whether the id exists is not revealed.
            raise _refuse(401, "no_matching_signature", "the signature does not verify")
        verdict = Verifier(keys, tolerance_seconds=self.tolerance_seconds, now=self._wall).verify(
            headers, body
        )
        if not verdict.ok or verdict.msg_id is None or verdict.timestamp is None:
            raise _refuse(401, verdict.reason, "the signature does not verify")
        ack = parse_acknowledgement(body, delivery_id)
        digest = hashlib.sha256(body).hexdigest()
        endpoint_id, tenant_id = target["endpoint_id"], target["tenant_id"]
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(q("delivery_ack_lock"), delivery_id)
            if row is None:  # pragma: no cover - deliveries are never deleted
                raise _refuse(401, "no_matching_signature", "the signature does not verify")
            seen = await conn.fetchrow(q("delivery_ack_message_get"), endpoint_id, verdict.msg_id)
            if seen is not None:
                if seen["body_sha256"] != digest:
                    raise _refuse(409, "message_conflict", "message id reused with another body")
                return _receipt(delivery_id, row, seen["effect"])
            if row["ack_state"] is None:
                raise _refuse(409, "not_expected", "the endpoint asks for no acknowledgements")
            if row["attempts"] == 0:
                raise _refuse(409, "not_sent", "the delivery was not sent yet")
            if row["ack_state"] in (AckState.AWAITING, AckState.OVERDUE):
                settled = await conn.fetchrow(
                    q("delivery_ack_record_if_awaited"),
                    delivery_id,
                    ack.outcome,
                    ack.reason,
                    verdict.msg_id,
                    now,
                )
                if settled is None:  # pragma: no cover - the row is locked above
                    raise _refuse(409, "conflicting_acknowledgement", "acknowledged meanwhile")
                effect, row = "recorded", settled
            elif row["ack_state"] == ack.outcome:
                effect = "repeated"
            else:
                raise _refuse(
                    409,
                    "conflicting_acknowledgement",
                    f"the delivery was acknowledged {row['ack_state']} already",
                )
            try:
                async with conn.transaction():
                    await conn.fetchval(
                        q("delivery_ack_message_insert"),
                        endpoint_id,
                        verdict.msg_id,
                        delivery_id,
                        tenant_id,
                        ack.outcome,
                        ack.reason,
                        digest,
                        verdict.timestamp,
                        verdict.key_id,
                        effect,
                        now,
                    )
            except asyncpg.UniqueViolationError:
                # The same message id, for another delivery of this endpoint, at once.
                raise _refuse(
                    409, "message_conflict", "message id reused with another body"
                ) from None
        if effect == "recorded":
            log.info("delivery %s acknowledged %s", delivery_id, ack.outcome)
        return _receipt(delivery_id, row, effect)

    async def _keys(
        self, conn: asyncpg.Connection, endpoint_id: uuid.UUID, now: datetime | None
    ) -> list[VerificationKey]:
        """The endpoint's signing keys as verification keys: a retired key only
        until its grace period ends."""
        return [
            VerificationKey(
                k.secret,
                k.key_id,
                not_after=k.expires_at.timestamp() if k.expires_at is not None else None,
            )
            for k in await signing_keys(conn, self.box, endpoint_id, now)
        ]


def _receipt(delivery_id: uuid.UUID, row: Any, effect: str) -> AckReceipt:
    # ``row`` is the delivery's (locked, or as just recorded): the first
    # acknowledgement's outcome, whichever message is answered.
    return AckReceipt(
        delivery_id=delivery_id,
        outcome=row["ack_state"],
        reason=row["ack_reason"],
        acknowledged_at=row["acknowledged_at"],
        late=row["ack_overdue_at"] is not None,
        effect=effect,
    )


@dataclass
class OverdueReport:
    batches: int = 0
    overdue: int = 0


class OverdueAcknowledgements(PeriodicPass):
    """The maintenance actor's pass: acknowledgements past their window become
    ``overdue``, one alert each (an endpoint event and a metric count)."""

    pass_name = "acknowledgement overdue pass"

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        interval_seconds: float = 30.0,
        batch: int = 500,
        clock: Clock | None = None,
        metrics: AckMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.interval_seconds = interval_seconds
        self.batch = batch
        self.clock = clock or DatabaseClock()
        self.metrics = metrics or default_ack_metrics()

    def pass_interval(self) -> float:
        return self.interval_seconds

    async def run_once(self) -> OverdueReport:
        """Mark every overdue acknowledgement, in batches of :attr:`batch`.

        Raises:
            RuntimeError: a batch marked or logged another number of deliveries
                than it locked (nothing of that batch is kept).
        """
        report = OverdueReport()
        while True:
            async with self.pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    q("delivery_ack_mark_overdue"), self.clock.now(), self.batch
                )
                if not row["locked"] == row["marked"] == row["logged"]:
                    raise RuntimeError(
                        f"overdue acknowledgements: locked {row['locked']}, marked "
                        f"{row['marked']}, logged {row['logged']}"
                    )
            n = int(row["marked"])
            report.batches += 1
            report.overdue += n
            if n:
                self.metrics.overdue.inc(n)
                log.warning("ALERT: %d deliveries without an acknowledgement in their window", n)
            if n < self.batch:
                return report
