"""The driver autoscaler: reads the backlog and the admission headroom, applies
:func:`pipeline.worker.scaling.decide`, and adds or drains drivers of a fleet.

The fleet is a protocol (:class:`DriverFleet`): the runtime supervisor's Ray
driver actors (:mod:`cluster.driver_fleet`) in a deployment, in-process
:class:`~pipeline.worker.loop.DriverLoop` s (:class:`LocalDriverFleet`) in the
burst benchmark and the integration test, so both run this same loop.

Invariants:

* **A drained driver gives its leases back.** Scale-down calls the fleet's
  ``drain``, which stops claiming, lets attempts finish within the grace and
  releases the rest under fence+1 (:meth:`DriverLoop.stop`); nothing is left
  for the reaper unless the database refuses the release.
* **Draining does not block deciding.** Drains run as tasks; a draining driver
  no longer counts in ``size()``, so a burst arriving meanwhile scales up at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pipeline.jobs import JobStore
from pipeline.periodic import PeriodicPass
from pipeline.worker.loop import DrainReport, DriverLoop
from pipeline.worker.scaling import (
    ScalingConfig,
    ScalingDecision,
    ScalingSignal,
    ScalingState,
    decide,
)

log = logging.getLogger(__name__)


class DriverFleet(Protocol):
    """Drivers the autoscaler may add to or drain."""

    def size(self) -> int:
        """Drivers running and not draining."""
        ...

    async def add(self, n: int) -> None:
        """Start ``n`` more drivers."""
        ...

    async def drain(self, n: int) -> list[DrainReport]:
        """Take ``n`` drivers out of ``size()`` now, drain and stop them."""
        ...


@dataclass
class ScalingEvent:
    """One change of the driver count, as the autoscaler saw it."""

    at: float
    before: int
    after: int
    reason: str
    oldest_runnable_age: float | None
    runnable: int
    running: int
    headroom: float | None


@dataclass
class DrainTotals:
    drained_drivers: int = 0
    finished: int = 0
    released: int = 0
    already_settled: int = 0
    unreleased: int = 0

    def add(self, r: DrainReport) -> None:
        self.drained_drivers += 1
        self.finished += r.finished
        self.released += r.released
        self.already_settled += r.already_settled
        self.unreleased += r.unreleased


@dataclass
class DriverAutoscaler(PeriodicPass):
    """Every ``interval_seconds``: signal → :func:`decide` → ``fleet.add`` / ``fleet.drain``."""

    store: JobStore
    fleet: DriverFleet
    config: ScalingConfig
    #: Leases per driver.
    concurrency: int
    #: The admission scopes' headroom (:func:`~pipeline.worker.scaling.headroom`); None: unknown.
    headroom: Callable[[], Awaitable[float | None]] | None = None
    interval_seconds: float = 2.0
    clock: Callable[[], float] = time.monotonic
    state: ScalingState = field(default_factory=ScalingState)
    events: list[ScalingEvent] = field(default_factory=list)
    drains: DrainTotals = field(default_factory=DrainTotals)
    pass_name = "driver autoscaler"

    def __post_init__(self) -> None:
        self._draining: set[asyncio.Task[None]] = set()

    def pass_interval(self) -> float:
        return self.interval_seconds

    async def _headroom(self) -> float | None:
        if self.headroom is None:
            return None
        try:
            return await self.headroom()
        except Exception:  # an unanswering scope must not stop scaling
            log.warning("admission headroom unavailable", exc_info=True)
            return None

    async def run_once(self) -> ScalingDecision:
        backlog = await self.store.backlog()
        age = backlog["oldest_runnable_age_seconds"]
        signal = ScalingSignal(
            now=self.clock(),
            drivers=self.fleet.size(),
            concurrency=self.concurrency,
            oldest_runnable_age=float(age) if age is not None else None,
            runnable=int(backlog["runnable"]),
            running=int(backlog["running"]),
            headroom=await self._headroom(),
        )
        decision = decide(self.config, signal, self.state)
        self.state = decision.state
        if decision.changes(signal.drivers):
            self.events.append(
                ScalingEvent(
                    signal.now,
                    signal.drivers,
                    decision.desired,
                    decision.reason,
                    signal.oldest_runnable_age,
                    signal.runnable,
                    signal.running,
                    signal.headroom,
                )
            )
            log.info("drivers %d -> %d (%s)", signal.drivers, decision.desired, decision.reason)
            if decision.desired > signal.drivers:
                await self.fleet.add(decision.desired - signal.drivers)
            else:
                task = asyncio.create_task(self._drain(signal.drivers - decision.desired))
                self._draining.add(task)
                task.add_done_callback(self._draining.discard)
        return decision

    async def _drain(self, n: int) -> None:
        for report in await self.fleet.drain(n):
            self.drains.add(report)

    async def settle(self) -> None:
        """Wait for the drains under way (tests, shutdown)."""
        while self._draining:
            await asyncio.wait(set(self._draining))

    async def stop(self) -> None:
        await super().stop()
        await self.settle()

    def summary(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "events": [asdict(e) for e in self.events],
            "drains": asdict(self.drains),
        }


class LocalDriverFleet:
    """In-process drivers: ``make(i)`` builds the i-th :class:`DriverLoop`."""

    def __init__(self, make: Callable[[int], DriverLoop], *, grace_seconds: float = 20.0) -> None:
        self.make = make
        self.grace_seconds = grace_seconds
        self.loops: list[DriverLoop] = []
        self.retired: list[DriverLoop] = []
        self._next = 0

    def size(self) -> int:
        return len(self.loops)

    async def add(self, n: int) -> None:
        for _ in range(n):
            loop = self.make(self._next)
            self._next += 1
            await loop.start()
            self.loops.append(loop)

    async def drain(self, n: int) -> list[DrainReport]:
        # The least busy go first: fewer attempts to wait for or give back.
        chosen = sorted(self.loops, key=lambda lp: lp.in_flight)[:n]
        for loop in chosen:
            self.loops.remove(loop)
        reports = await asyncio.gather(
            *(loop.stop(grace_seconds=self.grace_seconds) for loop in chosen)
        )
        self.retired.extend(chosen)
        return list(reports)

    async def close(self) -> list[DrainReport]:
        return await self.drain(len(self.loops))
