"""The runtime supervisor's task drivers as a :class:`pipeline.worker.DriverFleet`.

Driver autoscaling lives in the supervisor, not in a Ray Serve custom
autoscaling policy (docs/kuberay.md, "Autoscaling"): drivers are detached
actors the supervisor already creates, names and health-checks, the signal is
a database query (oldest runnable job) plus the admission actors' snapshots,
and scale-down must drain a driver (release its leases) before it goes. A
Serve policy runs synchronously in the Serve controller's loop on metrics the
replicas push, and Serve stops a replica on its own schedule; neither fits.

:func:`start_autoscaler` opens a small pool for the backlog query and runs
:class:`pipeline.worker.DriverAutoscaler` over :class:`RayDriverFleet` in the
supervisor replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from cluster.actor_kill import kill_actor
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.waiting import wait_within
from pipeline.worker import (
    DrainReport,
    DriverAutoscaler,
    ScalingConfig,
    best_headroom,
    headroom,
)

if TYPE_CHECKING:
    import asyncpg

    from pipeline.settings import Settings

log = logging.getLogger(__name__)

#: Longest one admission actor may take to answer a snapshot.
SNAPSHOT_TIMEOUT_S = 5.0


def _index(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


class Member(Protocol):
    """A supervised actor as the fleet sees it: its name and its handle (None: gone)."""

    name: str
    handle: Any


M = TypeVar("M", bound=Member)


class RayDriverFleet(Generic[M]):
    """Adds and drains the ``<prefix>-driver-<i>`` members of a supervisor.

    The supervisor hands over its member list, the lock its health checks hold,
    and two callbacks: ``new_driver`` (the member for driver ``i``) and
    ``ensure`` (create and start a member), so the fleet never imports it back.
    """

    def __init__(
        self,
        members: list[M],
        lock: asyncio.Lock,
        *,
        new_driver: Callable[[int], M],
        ensure: Callable[[M], Awaitable[None]],
        grace_seconds: float,
    ) -> None:
        self.members = members
        self.lock = lock
        self.new_driver = new_driver
        self.ensure = ensure
        self.grace_seconds = grace_seconds
        # Never reuse a name in this replica's life: a just-killed actor may still hold it.
        self._next = 1 + max((_index(m.name) for m in self._drivers()), default=-1)

    def _drivers(self) -> list[M]:
        return [m for m in self.members if "-driver-" in m.name]

    def size(self) -> int:
        return len(self._drivers())

    async def add(self, n: int) -> None:
        async with self.lock:
            for _ in range(n):
                member = self.new_driver(self._next)
                self._next += 1
                self.members.append(member)
                await self.ensure(member)

    async def drain(self, n: int) -> list[DrainReport]:
        async with self.lock:  # out of the member list first: no health check revives them
            chosen = sorted(self._drivers(), key=lambda m: _index(m.name))[-n:]
            for member in chosen:
                self.members.remove(member)
        return list(await asyncio.gather(*(self._drain_one(m) for m in chosen)))

    async def _drain_one(self, member: M) -> DrainReport:
        report = DrainReport()
        try:
            if member.handle is not None:
                ref = member.handle.stop.remote(self.grace_seconds)
                stats = await wait_within(
                    asyncio.wrap_future(ref.future()), self.grace_seconds + 30
                )
                report = DrainReport(**stats.get("drain", {}))
        except Exception as exc:  # a dead driver cannot drain: its leases expire
            log.warning("draining %s failed: %r", member.name, exc)
        finally:
            if member.handle is not None:
                kill_actor(member.handle)
                member.handle = None
        log.info("driver %s drained and stopped: %s", member.name, report)
        return report

    async def headroom(self) -> float | None:
        """The best headroom over the supervisor's admission scopes."""

        async def one(member: M) -> float | None:
            if member.handle is None:
                return None
            ref = member.handle.snapshot.remote()
            snap = await wait_within(asyncio.wrap_future(ref.future()), SNAPSHOT_TIMEOUT_S)
            return headroom(snap)

        scopes = [m for m in self.members if m.name.startswith("admission")]
        got = await asyncio.gather(*(one(m) for m in scopes), return_exceptions=True)
        return best_headroom([g if isinstance(g, float) else None for g in got])


class RunningAutoscaler:
    """The autoscaler of one supervisor replica and the pool its backlog query uses."""

    def __init__(self, autoscaler: DriverAutoscaler, pool: asyncpg.Pool) -> None:
        self.autoscaler = autoscaler
        self.pool = pool

    async def close(self) -> None:
        await self.autoscaler.stop()
        await self.pool.close()


async def start_autoscaler(
    fleet: RayDriverFleet[Any], settings: Settings, *, drivers: int, concurrency: int
) -> RunningAutoscaler | None:
    """Start driver autoscaling over ``fleet`` (None when the settings turn it off).

    ``drivers`` is the configured count (the default maximum), ``concurrency``
    each driver's attempts at once.
    """
    if not settings.driver_autoscaling:
        return None
    config = ScalingConfig.from_settings(settings, default_max=drivers)
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    autoscaler = DriverAutoscaler(
        JobStore(pool, settings),
        fleet,
        config,
        concurrency=concurrency,
        headroom=fleet.headroom,
        interval_seconds=settings.driver_scale_interval_seconds,
    )
    await autoscaler.start()
    log.info("driver autoscaling %d..%d", config.min_drivers, config.max_drivers)
    return RunningAutoscaler(autoscaler, pool)
