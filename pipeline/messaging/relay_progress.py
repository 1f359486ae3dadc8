"""A service loop's liveness: when it last finished a round, and whether it is stuck.

A loop that has died, or whose round has not finished for longer than
``stall_seconds``, does nothing while work waits, yet the process hosting it
still answers calls. :class:`LoopProgress` is what a health check reads to tell
the two apart (``cluster.drivers.Maintenance.health`` and its idempotent
``start()``, which the runtime supervisor calls on every health check). The
outbox relay counts its publishing rounds here; the queue consumers (the inbox
consumer and the DLQ archiver) count each connection cycle and each bounded
wait while connected.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass
class LoopProgress:
    """Counters of one service loop; times are ``time.monotonic()`` seconds."""

    started_at: float
    #: The last round that finished, successfully or not (None: none yet).
    last_round_at: float | None = None
    #: The last round that finished without an exception.
    last_success_at: float | None = None
    rounds: int = 0
    failed_rounds: int = 0
    last_error: str = ""

    @classmethod
    def begin(cls) -> LoopProgress:
        return cls(started_at=time.monotonic())

    def succeeded(self) -> None:
        now = time.monotonic()
        self.rounds += 1
        self.last_round_at = self.last_success_at = now

    def failed(self, exc: BaseException) -> None:
        self.rounds += 1
        self.failed_rounds += 1
        self.last_round_at = time.monotonic()
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]

    def seconds_since_round(self, now: float | None = None) -> float:
        """Seconds since a round last finished (since the start before the first)."""
        now = time.monotonic() if now is None else now
        return now - (self.last_round_at if self.last_round_at is not None else self.started_at)

    def stalled(self, stall_seconds: float, *, running: bool, now: float | None = None) -> bool:
        """Whether the loop is gone or has not finished a round in ``stall_seconds``."""
        return not running or self.seconds_since_round(now) > stall_seconds

    def as_dict(self, stall_seconds: float, *, running: bool) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "running": running,
            "stalled": self.stalled(stall_seconds, running=running, now=now),
            "seconds_since_round": round(self.seconds_since_round(now), 3),
            "seconds_since_success": (
                round(now - self.last_success_at, 3) if self.last_success_at is not None else None
            ),
            "rounds": self.rounds,
            "failed_rounds": self.failed_rounds,
            "last_error": self.last_error,
        }


#: The outbox relay's name for it (the first loop that had one).
RelayProgress = LoopProgress
