"""Task drivers and the maintenance actor: the Ray side of the job protocol.

A :class:`TaskDriver` is one Ray actor running a :class:`pipeline.worker.loop.DriverLoop`
on its own event loop: it claims fenced leases from PostgreSQL, asks the global
admission actor for budget, calls the engine (the Serve inference app through
its handle, or an OpenAI-compatible provider) and commits under the fence. Its
wake-ups come from its own :class:`pipeline.messaging.scheduler.Scheduler` (LISTEN/NOTIFY
plus a scan), so no driver depends on another, and a killed driver's jobs are
recovered by the reaper in :class:`Maintenance`.

Both classes are plain; :func:`build_driver` and :func:`build_maintenance` apply
``ray.remote(num_cpus=0)`` (they wait on I/O; on a 2-core machine a CPU-reserving
actor starves Serve).
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import asyncpg
from prometheus_client import REGISTRY

from cluster.admission import (
    ActorGate,
    AdmissionClient,
    AdmissionClientMetrics,
    PoolRoute,
    RoutedGate,
)
from cluster.crash_points import CrashPoints
from cluster.ocr_client import RayOcrPool
from deployments.observability import start_observability
from deployments.pools import OcrPoolConfig
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.database import create_pool
from pipeline.delivery import OverdueAcknowledgements, job_store
from pipeline.documents import open_document_store
from pipeline.extraction import Engine, OpenAICompatibleEngine
from pipeline.jobs import JobStore, Reaper, RetentionPass, Settled
from pipeline.jobs import RetentionConfig as JobRetentionConfig
from pipeline.messaging import (
    BrokerConfig,
    DeadLetterArchiver,
    DeadLetterRetention,
    InboxConsumer,
    OutboxRelay,
    RetentionConfig,
    Scheduler,
)
from pipeline.process_heap import freeze_startup_heap
from pipeline.service import health_report
from pipeline.service_group import ServiceGroup
from pipeline.settings import Settings
from pipeline.tenants import MasterDataCache, SpendReconciler
from pipeline.validation import policy_for
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig

log = logging.getLogger(__name__)


#: Connections of a driver's pool (claims, document reads, heartbeats, settles).
DRIVER_POOL = 4


@dataclass(frozen=True)
class EngineSpec:
    """Which engine drivers call: ``serve`` (the inference app) or ``openai`` (HTTP)."""

    kind: str = "serve"
    app_name: str = "fenceline-inference"
    base_url: str = ""
    model: str = ""
    api_key: str | None = None

    def build(self) -> Engine:
        if self.kind == "serve":
            from deployments.router import ServeEngine

            return ServeEngine.from_app(self.app_name)
        if self.kind == "openai":
            return OpenAICompatibleEngine(self.base_url, self.model, api_key=self.api_key)
        raise ValueError(f"unknown engine kind {self.kind!r}")


class TaskDriver(CrashPoints):
    """One driver process: claims, heartbeats, admission, engine call, fenced commit."""

    def __init__(
        self,
        settings: Settings,
        worker: WorkerConfig,
        engine: EngineSpec,
        *,
        admission_scope: str | None = None,
        admission_routes: list[dict[str, Any]] | None = None,
        delivery_actor: str | None = None,
        ocr: OcrPoolConfig | None = None,
        actor_prefix: str = "fenceline",
    ) -> None:
        self.settings = settings
        #: Pages without text go to the Ray OCR pool when the runtime runs one.
        self.ocr = RayOcrPool(ocr, prefix=actor_prefix) if ocr is not None else None
        self.worker = worker
        self.engine_spec = engine
        self.admission_scope = admission_scope
        #: ``PoolRoute`` fields per pool: each attempt asks its engine's scope.
        self.admission_routes = admission_routes
        self.delivery_actor = delivery_actor
        self._pool: asyncpg.Pool | None = None
        self._loop: DriverLoop | None = None
        self._scheduler: Scheduler | None = None
        self._bridges: list[RegistryBridge] = []
        self._client_metrics: AdmissionClientMetrics | None = None  # set by _admission
        #: This process's run: a Ray restart of the actor builds a new TaskDriver.
        self.run_id = uuid.uuid4().hex

    async def start(self) -> int:
        """Open the pool, build the engine and start claiming; returns the process id."""
        if self._loop is not None:
            return os.getpid()
        start_observability(self.settings, "fenceline-driver")
        # All four connections open before the first claim: a burst's first attempts
        # read their documents without connecting first (issue 21).
        self._pool = await create_pool(
            self.settings.database_url, min_size=DRIVER_POOL, max_size=DRIVER_POOL
        )
        store = job_store(self._pool, self.settings)  # deliveries commit with the outcome
        gate = self._admission()
        await self._abandon_earlier_runs(gate)
        runner = AttemptRunner(
            store,
            self.engine_spec.build(),
            self.worker,
            admission=gate,
            policy=policy_for(self.settings),
            on_settled=self._hand_off,
            master_data=MasterDataCache(self.settings.master_data_ttl_seconds),
            documents=open_document_store(self.settings),
            ocr=self.ocr,
        )
        self._scheduler = Scheduler(self._pool, self.settings)
        await self._scheduler.start()
        self._loop = DriverLoop(runner, signal=self._scheduler.signal)
        await self._loop.start()
        # Scheduler metrics (default registry) and the admission client's, to Ray's agent.
        clients = self._client_metrics
        registries = [REGISTRY] + ([clients.registry] if gate is not None and clients else [])
        registries += [self.ocr.metrics.registry] if self.ocr is not None else []
        self._bridges = [b for b in map(bridge_to_ray, registries) if b is not None]
        freeze_startup_heap()
        log.info("driver %s started (pid %d)", self.worker.worker_id, os.getpid())
        return os.getpid()

    async def _abandon_earlier_runs(self, gate: ActorGate | RoutedGate[ActorGate] | None) -> None:
        """After a crash, the dead run's grants come back once its attempts timed out.

        The dead process can no longer release them; without this they would hold
        their permits until the grant TTL. Best effort: an unreachable actor
        leaves them to the TTL.
        """
        gates = gate.gates.values() if isinstance(gate, RoutedGate) else [gate] if gate else []
        for g in gates:
            try:
                moved = await g.abandon_earlier_runs(self.worker.attempt_timeout_seconds)
            except Exception:
                log.warning("driver %s: abandoning earlier grants failed", self.worker.worker_id,
                            exc_info=True)  # fmt: skip
                continue
            if moved:
                log.warning(
                    "driver %s: %d grants of an earlier run abandoned", self.worker.worker_id, moved
                )

    def _admission(self) -> ActorGate | RoutedGate[ActorGate] | None:
        """One gate per admission scope, routed by pool when the runtime has engine scopes.

        The clients share one metrics registry, so one bridge carries them to Ray.
        """
        self._client_metrics = AdmissionClientMetrics()
        holder = {"holder": self.worker.worker_id, "holder_run": self.run_id}
        if self.admission_routes:
            routes = [PoolRoute.model_validate(r) for r in self.admission_routes]
            gates = {
                scope: ActorGate(
                    AdmissionClient.for_scope(scope, metrics=self._client_metrics), **holder
                )
                for scope in sorted({r.scope for r in routes})
            }
            return RoutedGate(gates, routes)
        if self.admission_scope is None:
            return None
        return ActorGate(
            AdmissionClient.for_scope(self.admission_scope, metrics=self._client_metrics),
            **holder,
        )

    async def _hand_off(self, _conn: None, settled: Settled) -> None:
        """Wake the delivery actor; the durable delivery rows are the source of truth."""
        if self.delivery_actor is None or settled.state.value != "SUCCEEDED":
            return
        import ray

        actor = ray.get_actor(self.delivery_actor)
        actor.notify.remote(str(settled.job_id))

    async def stop(self, grace_seconds: float = 30.0) -> dict[str, Any]:
        stats = await self.stats()
        while self._bridges:
            self._bridges.pop().stop()
        if self._loop is not None:
            # A drain: attempts past the grace give their leases back (fence+1).
            stats["drain"] = asdict(await self._loop.stop(grace_seconds=grace_seconds))
            self._loop = None
        if self._scheduler is not None:
            await self._scheduler.stop()
            self._scheduler = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        return stats

    async def run_once(self) -> int:
        """One claim round now (operators, tests): attempts started, 0 before start()."""
        return await self._loop.run_once() if self._loop is not None else 0

    def health(self) -> dict[str, Any]:
        """The scheduler's and the claim loop's liveness by name; empty before start()."""
        return health_report((("scheduler", self._scheduler), ("driver", self._loop)))

    async def stats(self) -> dict[str, Any]:
        if self._loop is None:
            return {"worker_id": self.worker.worker_id, "running": False}
        s = self._loop.stats
        return {
            "worker_id": self.worker.worker_id,
            "pid": os.getpid(),
            "running": True,
            "in_flight": self._loop.in_flight,
            "claimed": s.claimed,
            "outcomes": dict(s.outcomes),
            "config": asdict(self.worker),
            #: Registries recorded into Ray's metrics agent (0 outside Ray).
            "metrics_bridges": len(self._bridges),
        }


class Maintenance(CrashPoints):
    """The reaper, the outbox relay, DLQ retention, retention, the overdue
    acknowledgement pass, spend reconciliation and, with a broker, its two
    consumers, in one actor.

    With ``FENCELINE_AMQP_URL`` set the relay publishes execution signals to the
    work queue, so this actor also runs what reads them: the ingress
    :class:`~pipeline.messaging.inbox.InboxConsumer` (work queue → durable inbox → ack)
    and the :class:`~pipeline.messaging.dlq.DeadLetterArchiver` (DLQ → ``dead_letters``,
    which ``fenceline dlq`` reads). Without them the work queue would only grow
    until the broker refused publishes. Several Maintenance actors at once (an
    upgrade) are competing consumers: the inbox is unique on ``event_id``.

    Its metrics (broker path, reaper) live on this process's default Prometheus
    registry; while it runs inside Ray a
    :class:`~deployments.ray_metrics.RegistryBridge` records their
    ``fenceline_*`` families with ``ray.util.metrics``, so the node's Ray
    metrics agent (what Prometheus scrapes) exports them as ``ray_fenceline_*``.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool: asyncpg.Pool | None = None
        #: Every loop of the actor, by the name :meth:`services` and :meth:`health` use.
        self._services = ServiceGroup()
        self._metrics_bridge: RegistryBridge | None = None

    async def start(self) -> None:
        """Start every service; on a started actor, replace a stalled relay or consumer.

        The runtime supervisor calls this on every health check, so a relay whose
        loop died or stopped finishing rounds (:meth:`OutboxRelay.stalled`), or an
        inbox consumer or DLQ archiver whose loop died or hangs
        (:meth:`QueueConsumer.stalled`), is replaced within one health-check
        period, although the actor still answers. The periodic passes are only
        reported: nothing but ``stop()`` ends their loops.
        """
        if self._pool is not None:
            await self._services.replace_stalled()
            return
        start_observability(self.settings, "fenceline-maintenance")
        pool = self._pool = await create_pool(self.settings.database_url, min_size=1, max_size=4)
        settings = self.settings
        services = self._services
        await services.start(
            "reaper",
            lambda: Reaper(
                JobStore(pool, settings), interval_seconds=settings.reaper_interval_seconds
            ),
        )
        await services.start("relay", lambda: OutboxRelay(pool, settings), replace=True)
        # Broker or not, the archive exists (broker-less mode archives terminal
        # events directly), so its retention runs here either way.
        await services.start(
            "dlq_retention",
            lambda: DeadLetterRetention(pool, RetentionConfig.from_settings(settings)),
        )
        # Retention of settled jobs' content and history, per tenant policy
        # (pipeline/jobs/retention.py): short SKIP LOCKED batches, final jobs only.
        await services.start(
            "retention",
            lambda: RetentionPass(
                pool,
                JobRetentionConfig.from_settings(settings),
                store=open_document_store(settings),
            ),
        )
        # Acknowledgements the ERP owes past their window: one alert each.
        await services.start(
            "ack_overdue",
            lambda: OverdueAcknowledgements(
                pool, interval_seconds=settings.delivery_ack_overdue_interval_seconds
            ),
        )
        await services.start(
            "spend_reconciler",
            lambda: SpendReconciler(
                pool, settings, interval_seconds=settings.spend_reconcile_interval_seconds
            ),
        )
        if BrokerConfig.from_settings(settings) is not None:
            for consumer in (InboxConsumer, DeadLetterArchiver):
                await services.start(
                    consumer.__name__, partial(consumer, pool, settings), replace=True
                )
        self._metrics_bridge = bridge_to_ray(REGISTRY)  # None outside Ray

    @property
    def _relay(self) -> OutboxRelay | None:
        relay = self._services.get("relay")
        return relay if isinstance(relay, OutboxRelay) else None

    @property
    def _consumers(self) -> list[InboxConsumer | DeadLetterArchiver]:
        return [s for _, s in self._services if isinstance(s, InboxConsumer | DeadLetterArchiver)]

    def health(self) -> dict[str, Any]:
        """Each loop's liveness by name (the relay, the consumers by class, the
        periodic passes); empty before start()."""
        return self._services.health()

    async def stop(self) -> None:
        if self._metrics_bridge is not None:
            self._metrics_bridge.stop()
            self._metrics_bridge = None
        # Producers first, so the consumers drain what was already sent.
        await self._services.stop("relay")
        await self._services.stop()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def services(self) -> list[str]:
        """What runs in this actor now (operators, tests)."""
        bridged = ["RegistryBridge"] if self._metrics_bridge is not None else []
        return self._services.names() + bridged

    async def reaped(self) -> dict[str, int]:
        reaper = self._services.get("reaper")
        if not isinstance(reaper, Reaper):
            return {}
        t = reaper.total
        return {
            "rescheduled": len(t.rescheduled),
            "failed": len(t.failed),
            "deadline_failed": len(t.deadline_failed),
        }


def build_driver(
    settings: Settings,
    worker: WorkerConfig,
    engine: EngineSpec,
    *,
    admission_scope: str | None = None,
    delivery_actor: str | None = None,
    name: str | None = None,
) -> Any:
    """A TaskDriver actor (not started: call ``start.remote()``)."""
    import ray

    cls = ray.remote(num_cpus=0)(TaskDriver)
    options: dict[str, Any] = {"max_concurrency": 64}
    if name:
        options["name"] = name
    return cls.options(**options).remote(
        settings, worker, engine, admission_scope=admission_scope, delivery_actor=delivery_actor
    )


def build_maintenance(
    settings: Settings, *, name: str = "fenceline-maintenance", detached: bool = False
) -> Any:
    """Create (or get) the named Maintenance actor (not started: call ``start.remote()``).

    ``detached``: outlives its creator and is restarted by Ray after a crash (the
    runtime supervisor starts it again).
    """
    import ray

    cls = ray.remote(num_cpus=0)(Maintenance)
    options: dict[str, Any] = {"name": name, "get_if_exists": True}
    if detached:
        options.update(lifetime="detached", max_restarts=-1)
    return cls.options(**options).remote(settings)
