"""How the reference client (``fenceline submit``) waits: full jitter, a cap, Retry-After.

A client that polls every second in lockstep, and retries a 429 or 503 at once,
is the herd that keeps an overloaded intake overloaded. Invariants:

* **Full jitter**: every wait the client chooses itself is drawn uniformly from
  ``[0, min(cap, base * 2**n))`` (:class:`Backoff`), ``n`` the number of waits in
  a row without progress; so many clients spread out instead of syncing up.
* **Retry-After first**: a 429 or 503 that says when to come back (delta-seconds or
  an HTTP-date, :func:`pipeline.retry.parse_retry_after`) is retried no sooner than
  that; without the header the client backs off with jitter. A hint longer than
  ``max_retry_after_seconds`` is not waited out: the answer is returned as it is.
* **Safe to repeat**: only requests the API makes idempotent are retried (a
  submission carries its ``Idempotency-Key``; reads are reads), and a connection
  that failed before an answer is retried the same way.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from pipeline.retry import parse_retry_after

#: Statuses that mean "later", not "no": quota (429) and capacity (503).
RETRY_STATUSES = frozenset({429, 503})

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class Backoff:
    """Capped exponential backoff with full jitter."""

    base_seconds: float = 0.5
    cap_seconds: float = 30.0
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if not 0 < self.base_seconds <= self.cap_seconds:
            raise ValueError("backoff needs 0 < base_seconds <= cap_seconds")

    def ceiling(self, n: int) -> float:
        """The longest wait after ``n`` waits in a row (``n`` from 0)."""
        return min(self.cap_seconds, self.base_seconds * 2.0 ** min(max(n, 0), 62))

    def delay(self, n: int) -> float:
        """A wait drawn uniformly from ``[0, ceiling(n)]``."""
        return self.rng.uniform(0.0, self.ceiling(n))


@dataclass
class PoliteClient:
    """An ``httpx.AsyncClient`` whose requests honour 429/503 and their Retry-After."""

    client: httpx.AsyncClient
    backoff: Backoff = field(default_factory=Backoff)
    max_tries: int = 8
    max_retry_after_seconds: float = 600.0
    sleep: Sleep = asyncio.sleep
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    async def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        """Send, and on 429/503 or a failed connection wait and send again.

        Returns the last answer (a 429/503 when the tries ran out or the hint is
        longer than ``max_retry_after_seconds``). Raises the transport error when
        the last try could not connect.
        """
        for n in range(self.max_tries):
            last = n == self.max_tries - 1
            try:
                r = await self.client.request(method, url, **kw)
            except httpx.TransportError:
                if last:
                    raise
                await self.sleep(self.backoff.delay(n))
                continue
            if r.status_code not in RETRY_STATUSES or last:
                return r
            hint = parse_retry_after(r.headers.get("Retry-After"), self.now())
            if hint is not None and hint > self.max_retry_after_seconds:
                return r
            await self.sleep(hint if hint is not None else self.backoff.delay(n))
        raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover
