"""One shape for every long-running loop: ``start()``, ``stop()``, ``run_once()``, ``health()``.

The reaper, the scheduler, the outbox relay, the queue consumers, the delivery
dispatcher, the driver loop and the listeners all run one task between
``start()`` and ``stop()``; tests drive one pass with ``run_once()``, and a health
check reads ``health()``. :class:`Service` is that shape, checked structurally.
:class:`LoopService` is the base of the loops run as one task (their task, counters
and health); :class:`~pipeline.periodic.PeriodicPass` builds on it for the loops
that are a plain pass repeated every interval, and the others implement start,
stop and run_once over the loop they have (a LISTEN connection, a broker
consumer, a pool of attempts).

Liveness is the same question everywhere: has the loop died, or has it not
finished a pass for longer than any pass may take? A loop that has stopped doing
anything still answers calls, so a health check cannot tell from the outside.
:class:`LoopProgress` counts a loop's passes; :class:`ServiceHealth` is one
snapshot of it. An actor answers its loops' snapshots by name
(:func:`health_report`); the maintenance actor keeps its loops in a
:class:`~pipeline.service_group.ServiceGroup`, and its idempotent ``start()``,
which the runtime supervisor calls on every health check, replaces a stalled
relay or consumer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ServiceHealth:
    """One snapshot of a service loop's liveness.

    Invariant: ``stalled`` is true whenever ``running`` is false (a loop that is
    gone does no work); ``last_error`` is empty once a later pass succeeded.
    """

    name: str
    #: The loop's task exists and has not ended.
    running: bool
    #: Gone, or no pass finished within the service's stall bound.
    stalled: bool
    #: Passes finished since start, failed ones included.
    passes: int = 0
    failed_passes: int = 0
    #: Seconds since a pass last finished (since the start, before the first).
    quiet_seconds: float = 0.0
    #: Seconds since a pass last succeeded (None: none has yet).
    seconds_since_success: float | None = None
    #: ``"ExcType: message"`` of the last pass when it failed; "" when it succeeded.
    last_error: str = ""
    #: What only this kind of loop knows (a consumer's deliveries in flight).
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as plain JSON-able values (operators' and the actor's view)."""
        out: dict[str, Any] = {
            "name": self.name,
            "running": self.running,
            "stalled": self.stalled,
            "passes": self.passes,
            "failed_passes": self.failed_passes,
            "quiet_seconds": round(self.quiet_seconds, 3),
            "seconds_since_success": (
                None if self.seconds_since_success is None else round(self.seconds_since_success, 3)
            ),
            "last_error": self.last_error,
        }
        out.update(self.details)
        return out


@dataclass
class LoopProgress:
    """Counters of one service loop; times are ``time.monotonic()`` seconds.

    ``last_error`` keeps the most recent failure even after later successes (what
    went wrong last); :meth:`health` reports it only while the last pass failed.
    """

    started_at: float
    #: The last round that finished, successfully or not (None: none yet).
    last_round_at: float | None = None
    #: The last round that finished without an exception.
    last_success_at: float | None = None
    rounds: int = 0
    failed_rounds: int = 0
    last_error: str = ""
    #: Whether the most recent round raised.
    last_failed: bool = False

    @classmethod
    def begin(cls) -> LoopProgress:
        return cls(started_at=time.monotonic())

    def succeeded(self) -> None:
        now = time.monotonic()
        self.rounds += 1
        self.last_round_at = self.last_success_at = now
        self.last_failed = False

    def failed(self, exc: BaseException) -> None:
        self.rounds += 1
        self.failed_rounds += 1
        self.last_round_at = time.monotonic()
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        self.last_failed = True

    def seconds_since_round(self, now: float | None = None) -> float:
        """Seconds since a round last finished (since the start before the first)."""
        now = time.monotonic() if now is None else now
        return now - (self.last_round_at if self.last_round_at is not None else self.started_at)

    def stalled(
        self, stall_seconds: float | None, *, running: bool, now: float | None = None
    ) -> bool:
        """Whether the loop is gone or has not finished a round in ``stall_seconds``
        (None: the loop has no stall bound, and only a gone loop is stalled)."""
        if not running:
            return True
        return stall_seconds is not None and self.seconds_since_round(now) > stall_seconds

    def health(
        self,
        name: str,
        *,
        running: bool,
        stall_seconds: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> ServiceHealth:
        """A snapshot of these counters for the loop called ``name``."""
        now = time.monotonic()
        return ServiceHealth(
            name=name,
            running=running,
            stalled=self.stalled(stall_seconds, running=running, now=now),
            passes=self.rounds,
            failed_passes=self.failed_rounds,
            quiet_seconds=self.seconds_since_round(now),
            seconds_since_success=(
                None if self.last_success_at is None else now - self.last_success_at
            ),
            last_error=self.last_error if self.last_failed else "",
            details=dict(details or {}),
        )


class LoopService:
    """What every loop run as one task shares: the task, its counters, its health.

    A subclass starts its loop with :meth:`_launch` in ``start()``, records each
    pass on :attr:`progress`, and says what its health is called
    (:meth:`health_name`), how long a pass may take (:attr:`stall_seconds`) and
    what only it knows (:meth:`health_details`). How it starts, loops and stops
    is its own (a LISTEN connection, a broker consumer, a pool of attempts).
    """

    #: No pass finished for this long: the loop is stuck (None: only a gone loop is).
    stall_seconds: float | None = None
    _task: asyncio.Task[None] | None = None
    _progress: LoopProgress | None = None

    @property
    def progress(self) -> LoopProgress:
        """The loop's counters since the last start (fresh ones before any start)."""
        if self._progress is None:
            self._progress = LoopProgress.begin()
        return self._progress

    @property
    def running(self) -> bool:
        """The loop's task exists and has not ended."""
        return self._task is not None and not self._task.done()

    def stalled(self) -> bool:
        """Whether the loop is gone or finished no pass within :attr:`stall_seconds`."""
        return self.progress.stalled(self.stall_seconds, running=self.running)

    def health_name(self) -> str:
        raise NotImplementedError

    def health_details(self) -> Mapping[str, Any]:
        """What only this kind of loop knows (a consumer's deliveries in flight)."""
        return {}

    def health(self) -> ServiceHealth:
        """Liveness for health checks and operators (see :class:`LoopProgress`)."""
        return self.progress.health(
            self.health_name(),
            running=self.running,
            stall_seconds=self.stall_seconds,
            details=self.health_details(),
        )

    def _launch(self, loop: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Count from zero again and run ``loop`` as the service's task."""
        self._progress = LoopProgress.begin()
        self._task = asyncio.create_task(loop, name=name)
        return self._task


@runtime_checkable
class Service(Protocol):
    """A long-running loop: what starts it, stops it, runs one pass, and says how it is.

    ``stop()`` may take keyword arguments with defaults (a drain's grace) and return a
    report; ``run_once()`` may take a bound with a default and returns what the pass
    did. ``isinstance`` checks the four names only; mypy checks the signatures.
    """

    async def start(self) -> None: ...

    async def stop(self) -> object: ...

    async def run_once(self) -> object: ...

    def health(self) -> ServiceHealth: ...


def health_report(services: Iterable[tuple[str, Service | None]]) -> dict[str, dict[str, Any]]:
    """Each present service's health by name, as plain values (what an actor's
    ``health()`` answers; a service not started yet is left out)."""
    return {name: s.health().as_dict() for name, s in services if s is not None}
