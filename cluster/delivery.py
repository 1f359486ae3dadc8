"""DeliveryActor: the ERP delivery dispatcher as a Ray actor.

The actor is a plain class around :class:`pipeline.delivery.dispatcher.DeliveryDispatcher`
(the tested unit); :func:`build_delivery_actor` applies ``ray.remote`` with
``num_cpus=0`` (it waits on network I/O, and on a 2-core machine a CPU-reserving
actor deadlocks Serve). Construction is separate from start.

Drivers call :meth:`DeliveryActor.notify` after a completion commits. That
hand-off is only a wake-up: the deliveries were created in the completion's own
transaction, and the dispatcher also listens on ``fenceline_deliveries`` and
polls, so a lost hand-off delays nothing beyond the poll interval.
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg

from cluster.crash_points import CrashPoints
from deployments.observability import start_observability
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.clock import Clock
from pipeline.data_keys import DataKeys
from pipeline.database import create_pool
from pipeline.delivery import (
    AfterResponse,
    DeliveryConfig,
    DeliveryDispatcher,
    DeliveryStore,
    EgressClient,
    SecretBox,
    guard_from_settings,
)
from pipeline.service import health_report
from pipeline.settings import Settings

log = logging.getLogger(__name__)

ACTOR_NAME = "fenceline-delivery"


def build_dispatcher(
    pool: asyncpg.Pool,
    settings: Settings,
    *,
    clock: Clock | None = None,
    worker_id: str | None = None,
    after_response: AfterResponse | None = None,
) -> DeliveryDispatcher:
    """A dispatcher wired from settings: guard, sealed-secret box and client."""
    config = DeliveryConfig.from_settings(settings)
    client = EgressClient(guard_from_settings(settings), timeout_seconds=config.timeout_seconds)
    return DeliveryDispatcher(
        pool,
        config,
        client=client,
        box=SecretBox.from_settings(settings),
        keys=DataKeys.from_settings(settings),
        clock=clock,
        worker_id=worker_id,
        after_response=after_response,
    )


class DeliveryActor(CrashPoints):
    """Owns a pool and a dispatcher; every method is async (one actor event loop)."""

    def __init__(self, settings: Settings | None = None, *, worker_id: str | None = None) -> None:
        self.settings = settings or Settings()
        self.worker_id = worker_id
        self._pool: asyncpg.Pool | None = None
        self._dispatcher: DeliveryDispatcher | None = None
        self._bridge: RegistryBridge | None = None

    async def start(self) -> None:
        """Open the pool and start the background dispatch loop (idempotent)."""
        if self._dispatcher is not None:
            return
        start_observability(self.settings, "fenceline-delivery")
        self._pool = await create_pool(self.settings.database_url, min_size=1, max_size=4)
        self._dispatcher = build_dispatcher(self._pool, self.settings, worker_id=self.worker_id)
        await self._dispatcher.start()
        self._bridge = bridge_to_ray(self._dispatcher.metrics.registry)  # None outside Ray

    async def stop(self) -> None:
        """Finish in-flight attempts, then release the client and the pool."""
        if self._bridge is not None:
            self._bridge.stop()
            self._bridge = None
        if self._dispatcher is not None:
            await self._dispatcher.close()
            self._dispatcher = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def notify(self, job_id: str | None = None) -> bool:
        """Wake the dispatcher for a just-completed job; False if not started."""
        if self._dispatcher is None:
            return False
        log.debug("delivery hand-off for job %s", job_id)
        self._dispatcher.wake()
        return True

    async def run_once(self) -> dict[str, Any]:
        """One dispatch round (operators, tests); returns the round's counts."""
        if self._dispatcher is None:
            raise RuntimeError("DeliveryActor.start() was not called")
        report = await self._dispatcher.run_once()
        return {"claimed": report.claimed, "reaped": report.reaped, **report.outcomes}

    def health(self) -> dict[str, Any]:
        """The dispatch loop's liveness by name; empty before start()."""
        return health_report([("dispatcher", self._dispatcher)])

    async def backlog(self) -> dict[str, Any]:
        """Delivery counts per state and the oldest due delivery's age."""
        if self._pool is None:
            raise RuntimeError("DeliveryActor.start() was not called")
        return await DeliveryStore(self._pool).backlog()


def build_delivery_actor(
    settings: Settings | None = None,
    *,
    name: str = ACTOR_NAME,
    namespace: str | None = None,
    detached: bool = False,
) -> Any:
    """Create (or get) the named DeliveryActor; the caller then awaits ``start.remote()``.

    ``detached``: outlives its creator and is restarted by Ray after a crash (the
    runtime supervisor starts it again).
    """
    import ray

    remote_cls = ray.remote(num_cpus=0)(DeliveryActor)
    options: dict[str, Any] = {"name": name, "get_if_exists": True}
    if namespace is not None:
        options["namespace"] = namespace
    if detached:
        options.update(lifetime="detached", max_restarts=-1)
    return remote_cls.options(**options).remote(settings)
