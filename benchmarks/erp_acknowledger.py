"""The reference ERP's commercial acknowledgements (issue 47, item 3).

The receiver (:mod:`benchmarks.erp_receiver`) answers 2xx once a delivery is in its
inbox; the business answer comes later. With an :class:`AckPlan` the receiver
hands every delivery it accepted to an :class:`Acknowledger`, which POSTs a
Standard-Webhooks-signed ``delivery.acknowledgement.v1`` to Fenceline's
``POST /v1/deliveries/{id}/acknowledgement``: at once, after ``late_seconds``, or
never, by fraction (for the benchmark's "90 % at once, 5 % late, 5 % never").

Invariants:

* The choice is a function of the delivery id and the plan's seed, so a delivery
  that arrives twice is treated the same way both times.
* One delivery's acknowledgement is one message: its ``webhook-id``
  (``ack_<delivery id>``) and body are fixed the first time, and every retry (a
  5xx, a dropped connection) re-signs the same bytes with a fresh timestamp.
  Fenceline answers a repeat as the first time, so nothing is recorded twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from pipeline.delivery import EVENT_ACKNOWLEDGEMENT
from pipeline.delivery.signing import webhook_headers

log = logging.getLogger(__name__)

#: The choices of :meth:`AckPlan.choose`.
CHOICES = ("at_once", "late", "never")


@dataclass(frozen=True)
class AckPlan:
    """How the reference ERP acknowledges.

    Attributes:
        callback_url: Fenceline's API base URL (``http://127.0.0.1:8000``).
        secret: the endpoint's signing secret (the one the receiver verifies with).
        at_once: the fraction acknowledged right after the 2xx.
        late: the fraction acknowledged ``late_seconds`` later; the rest never.
        outcome: what a new delivery is answered (``accepted``; a delivery id that
            arrives again is answered the same, as one message).
        seed: varies which deliveries fall in which fraction.
        attempts: tries per acknowledgement (a 5xx or transport error is retried).
    """

    callback_url: str
    secret: str
    at_once: float = 1.0
    late: float = 0.0
    late_seconds: float = 5.0
    outcome: str = "accepted"
    seed: int = 0
    attempts: int = 5

    def __post_init__(self) -> None:
        if not (0 <= self.at_once and 0 <= self.late and self.at_once + self.late <= 1):
            raise ValueError("at_once and late are fractions that sum to at most 1")

    def choose(self, delivery_id: str) -> str:
        """``at_once``, ``late`` or ``never`` for this delivery (stable per id)."""
        h = hashlib.sha256(f"{self.seed}:{delivery_id}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2**64
        if u < self.at_once:
            return "at_once"
        return "late" if u < self.at_once + self.late else "never"


@dataclass
class AckStats:
    chosen: dict[str, int] = field(default_factory=dict)
    #: Final answers by HTTP status (0: no answer after every attempt).
    answers: dict[int, int] = field(default_factory=dict)
    #: Deliveries whose acknowledgement Fenceline took (200), by delivery id.
    acknowledged: set[str] = field(default_factory=set)


class Acknowledger:
    """Sends the plan's acknowledgements from the receiver's event loop."""

    def __init__(
        self,
        plan: AckPlan,
        *,
        client: httpx.AsyncClient | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.plan = plan
        self.client = client or httpx.AsyncClient(timeout=10.0)
        self.now = now
        self.stats = AckStats()
        self._decided: dict[str, tuple[str, bytes]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def schedule(self, delivery_id: str) -> str:
        """Acknowledge ``delivery_id`` as the plan says; returns the choice."""
        choice = self.plan.choose(delivery_id)
        if delivery_id not in self._decided:
            self.stats.chosen[choice] = self.stats.chosen.get(choice, 0) + 1
            self._decided[delivery_id] = (choice, self._body(delivery_id))
        if choice == "never":
            return choice
        delay = 0.0 if choice == "at_once" else self.plan.late_seconds
        task = asyncio.create_task(self._send_after(delay, delivery_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return choice

    def _body(self, delivery_id: str) -> bytes:
        return json.dumps(
            {
                "type": EVENT_ACKNOWLEDGEMENT,
                "timestamp": datetime.fromtimestamp(self.now(), UTC).isoformat(),
                "data": {"delivery_id": delivery_id, "outcome": self.plan.outcome},
            },
            separators=(",", ":"),
        ).encode()

    async def _send_after(self, delay: float, delivery_id: str) -> None:
        if delay:
            await asyncio.sleep(delay)
        status = await self.send(delivery_id)
        self.stats.answers[status] = self.stats.answers.get(status, 0) + 1
        if status == 200:
            self.stats.acknowledged.add(delivery_id)

    async def send(self, delivery_id: str) -> int:
        """POST the delivery's one acknowledgement message; the final HTTP status."""
        _, body = self._decided.setdefault(delivery_id, ("at_once", self._body(delivery_id)))
        msg_id = f"ack_{uuid.UUID(delivery_id)}"
        url = f"{self.plan.callback_url.rstrip('/')}/v1/deliveries/{delivery_id}/acknowledgement"
        status = 0
        for attempt in range(self.plan.attempts):
            headers = webhook_headers([self.plan.secret], msg_id, int(self.now()), body)
            headers["content-type"] = "application/json"
            try:
                r = await self.client.post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                log.warning("acknowledgement of %s: %s", delivery_id, exc)
                status = 0
            else:
                status = r.status_code
                if status < 500:
                    return status
            await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
        return status

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for scheduled acknowledgements (late ones included) to be sent."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.aclose()
