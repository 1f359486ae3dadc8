"""The job runtime on a shared Ray cluster, started and kept alive by a Serve application.

On KubeRay the RayService's ``serveConfigV2`` is the only thing the operator
deploys, so the long-running side of the system — admission actor, delivery
actor, maintenance actor (reaper + outbox relay) and the task drivers — starts
from there too: the application ``fenceline-runtime``
(``import_path: cluster.supervisor:runtime_app``) has one deployment,
:class:`RuntimeSupervisor`, whose replica creates those actors as **named,
detached** Ray actors and re-checks them on every Serve health check.

Why this and not a long-running ``RayJob``: a RayJob submits to one RayCluster
chosen by name, but a RayService replaces its RayCluster (with a new name) on
every zero-downtime upgrade, so the job would die with the old cluster and
nothing would resubmit it. Started from ``serveConfigV2``, the runtime is
versioned, upgraded and health-checked together with the intake and inference
apps, and a new cluster brings its own runtime up before traffic moves to it.

Invariants:

* **Idempotent start.** Actors are created with ``get_if_exists=True`` under
  fixed names and their ``start()`` methods are idempotent, so a restarted
  supervisor replica re-attaches instead of duplicating drivers; Ray restarts a
  crashed actor process (``max_restarts=-1``) and the next health check calls
  ``start()`` on it again.
* **Two runtimes at once are safe.** During an upgrade the old and the new
  cluster both run drivers against the same PostgreSQL: claims use
  ``SKIP LOCKED`` and fences, the relay leases its batches and the inbox is
  unique on ``event_id``, so nothing needs a cluster-wide singleton.
* **Secrets never enter the actor table.** Actors receive
  :class:`EnvironmentSettings`, which pickles as a reference and re-reads
  ``FENCELINE_*`` from the receiving process (the pod's environment, filled from
  Kubernetes Secrets); the GCS, and the Redis behind GCS fault tolerance, never
  hold a database password.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.actor_kill import kill_actor
from cluster.runtime_config import MAX_DRIVER_CONCURRENCY, RuntimeConfig
from pipeline.settings import Settings
from pipeline.waiting import wait_within

if TYPE_CHECKING:
    from ray.serve import Application

log = logging.getLogger(__name__)

APP_NAME = "fenceline-runtime"
IMPORT_PATH = "cluster.supervisor:runtime_app"
SUPERVISOR_DEPLOYMENT = "supervisor"


class EnvironmentSettings(Settings):
    """Settings that travel by reference: unpickling re-reads the environment there."""

    def __reduce__(self) -> tuple[type[EnvironmentSettings], tuple[()]]:
        return (EnvironmentSettings, ())


@dataclass
class _Member:
    """One supervised actor: how to create it and how to start it."""

    name: str
    create: Callable[[], Any]
    start: Callable[[Any], Any]
    handle: Any = None


class RuntimeSupervisor:
    """Serve deployment body: creates, starts and re-checks the runtime's actors,
    and scales the task drivers (:mod:`cluster.driver_fleet`)."""

    _autoscaler: Any = None
    _ocr_fleet: Any = None

    async def __init__(self, config: Mapping[str, Any] | RuntimeConfig) -> None:  # type: ignore[misc]
        self.config = (
            config if isinstance(config, RuntimeConfig) else RuntimeConfig.model_validate(config)
        )
        self.settings: Settings = EnvironmentSettings()
        self._members = self._plan()
        self._lock = asyncio.Lock()
        await self.reconcile()  # the replica (and the app) is only RUNNING once all started
        from cluster.driver_fleet import RayDriverFleet, start_autoscaler

        fleet = RayDriverFleet(
            self._members,
            self._lock,
            new_driver=self.driver_member,
            ensure=self._ensure,
            grace_seconds=self.settings.driver_drain_grace_seconds,
        )
        self._autoscaler = await start_autoscaler(
            fleet, self.settings, drivers=self.config.drivers, concurrency=self.config.concurrency
        )
        from cluster.ocr_fleet import start_ocr_fleet

        self._ocr_fleet = await start_ocr_fleet(
            self.config.ocr, self._members, self._lock, self.ocr_replica_member, self._ensure
        )

    def _plan(self) -> list[_Member]:
        from cluster.delivery import ACTOR_NAME, build_delivery_actor
        from cluster.drivers import EngineSpec, build_maintenance

        cfg = self.config
        maintenance = f"{cfg.actor_prefix}-maintenance"
        scopes = cfg.admission_scopes(self.settings)  # a provider's budgets: FENCELINE_PROVIDER_*
        members = [
            _Member(
                "admission" if len(scopes) == 1 else f"admission-{scope}",
                _admission_factory(scope, limits, self.settings),
                lambda h: h.start.remote(),
            )
            for scope, limits in scopes.items()
        ]
        members += self._ocr_members()
        members += [
            _Member(
                ACTOR_NAME,
                lambda: build_delivery_actor(self.settings, detached=True),
                lambda h: h.start.remote(),
            ),
            _Member(
                maintenance,
                lambda: build_maintenance(self.settings, name=maintenance, detached=True),
                lambda h: h.start.remote(),
            ),
        ]
        provider_url, provider_model = cfg.provider(self.settings)
        engine = EngineSpec(
            kind=cfg.engine,
            app_name=cfg.engine_app,
            base_url=provider_url,
            model=provider_model,
            api_key=(
                self.settings.provider_api_key.get_secret_value() or None
                if self.settings.provider_api_key
                else None
            ),
        )
        self._engine = engine
        self._run = uuid.uuid4().hex[:6]
        # Drivers a previous replica's autoscaler added are adopted, not orphaned.
        indices = set(range(cfg.drivers)) | set(_running_driver_indices(cfg.actor_prefix))
        members += [self.driver_member(i) for i in sorted(indices)]
        return members

    def _ocr_members(self) -> list[_Member]:
        """The OCR pool: its admission scope (pages, no ledger: a grant is a page of
        seconds, not an LLM call to account for) and its replicas; none without one."""
        from cluster.admission import actor_name, admission_actor

        cfg, scope = self.config, self.config.ocr_scope()
        if cfg.ocr is None or scope is None:
            return []
        name, limits = scope
        members = [
            _Member(
                f"admission-{name}",
                lambda: admission_actor(actor_name(name), {"scope": name, **limits}),
                lambda h: h.start.remote(),
            )
        ]
        # Replicas a previous replica's OCR fleet added are adopted, not orphaned.
        running = _running_driver_indices(cfg.actor_prefix, "ocr")
        indices = set(range(cfg.ocr.replicas)) | {i for i in running if i < cfg.ocr.max_replicas}
        return members + [self.ocr_replica_member(i) for i in sorted(indices)]

    def ocr_replica_member(self, index: int) -> _Member:
        """The supervised member for OCR replica ``<prefix>-ocr-<index>``."""
        from deployments.ocr_pool import build_ocr_replica, replica_name

        assert self.config.ocr is not None
        replica = replica_name(self.config.actor_prefix, index)
        return _Member(
            replica,
            functools.partial(build_ocr_replica, self.config.ocr, replica),
            lambda h: h.start.remote(),
        )

    def driver_member(self, index: int) -> _Member:
        """The supervised member for driver ``<prefix>-driver-<index>``."""
        from cluster.delivery import ACTOR_NAME
        from pipeline.extraction import DocumentLimits
        from pipeline.worker import WorkerConfig

        cfg = self.config
        name = f"{cfg.actor_prefix}-driver-{index}"
        worker = WorkerConfig(
            worker_id=f"{name}-{self._run}",
            concurrency=cfg.concurrency,
            claim_batch=cfg.concurrency,
            # Timing is deployment configuration (FENCELINE_*), not code.
            **{
                "attempt_timeout_seconds": self.settings.attempt_timeout_seconds,
                "heartbeat_seconds": self.settings.heartbeat_seconds,
                "contract": self.settings.extraction_contract,
                "limits": DocumentLimits.from_settings(self.settings),
                "max_document_pages": self.settings.max_document_pages,
                **cfg.worker,
            },
        )
        return _Member(
            name,
            _driver_factory(name, worker, self._engine, self.settings, cfg, ACTOR_NAME),
            lambda h: h.start.remote(),
        )

    async def reconcile(self) -> dict[str, str]:
        """Make every member exist and run; returns ``{name: "ok" | "replaced"}``.

        Liveness is checked for all members at once (a dead one costs at most
        ``ping_timeout_s``, not that times the number of members); creation and
        ``start()`` then go in order, admission and delivery before the drivers
        that use them. ``start()`` is called on every member every time: it is
        idempotent, and it is what starts a member Ray restarted after a crash.

        Raises:
            RuntimeError: a member could not be (re)started within ``ping_timeout_s``.
        """
        report: dict[str, str] = {}
        async with self._lock:
            alive = await asyncio.gather(
                *(self._alive(m.handle) for m in self._members if m.handle is not None)
            )
            with_handles = [m for m in self._members if m.handle is not None]
            for member, ok in zip(with_handles, alive, strict=True):
                if not ok:
                    log.warning("runtime actor %s is not answering; replacing it", member.name)
                    kill_actor(member.handle)
                    member.handle = None
                    report[member.name] = "replaced"
            for member in self._members:
                await self._ensure(member)
                report.setdefault(member.name, "ok")
        return report

    async def _ensure(self, member: _Member) -> None:
        if member.handle is None:
            member.handle = member.create()
        started = member.start(member.handle)
        try:
            if started is not None:
                await wait_within(asyncio.wrap_future(started.future()), self.config.ping_timeout_s)
        except Exception as exc:
            raise RuntimeError(f"runtime actor {member.name} failed to start: {exc!r}") from exc

    async def _alive(self, handle: Any) -> bool:
        """Whether the actor answers within ``ping_timeout_s``.

        A call that fails is retried until then: an actor whose process just
        died fails calls in flight while Ray restarts it (``max_restarts=-1``),
        and replacing it then would throw away a restart already under way.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.ping_timeout_s
        while (remaining := deadline - loop.time()) > 0:
            try:
                ref = handle.__ray_ready__.remote()
                await wait_within(asyncio.wrap_future(ref.future()), remaining)
            except TimeoutError:
                return False
            except Exception:  # died or restarting: ask again shortly
                await asyncio.sleep(min(0.5, max(remaining, 0.0)))
                continue
            return True
        return False

    async def check_health(self) -> None:
        """Serve's health check: repair what died; raise only if repair fails."""
        report = await self.reconcile()
        replaced = [name for name, outcome in report.items() if outcome != "ok"]
        if replaced:
            log.warning("runtime actors replaced: %s", replaced)

    async def status(self) -> dict[str, Any]:
        """Names and liveness of the supervised actors (operators, tests)."""

        async def alive(member: _Member) -> bool:
            return member.handle is not None and await self._alive(member.handle)

        states = await asyncio.gather(*(alive(m) for m in self._members))
        actors = {m.name: ok for m, ok in zip(self._members, states, strict=True)}
        scaling = self._autoscaler.autoscaler.summary() if self._autoscaler else None
        ocr = self._ocr_fleet.last if self._ocr_fleet else None
        return {
            "config": self.config.model_dump(),
            "actors": actors,
            "autoscaling": scaling,
            "ocr_autoscaling": ocr,
        }

    async def __del__(self) -> None:
        """Graceful shutdown: drivers release their leases, then the actors go.

        Detached actors outlive their creator; without this, deleting the app
        would leave drivers claiming jobs with nobody supervising them.
        """
        if self._autoscaler is not None:
            await self._autoscaler.close()
            self._autoscaler = None
        if self._ocr_fleet is not None:
            await self._ocr_fleet.stop()
            self._ocr_fleet = None
        for member in reversed(self._members):
            if member.handle is None:
                continue
            stop = getattr(member.handle, "stop", None)
            if stop is not None:
                try:
                    ref = (
                        stop.remote(self.config.stop_grace_s)
                        if "driver" in member.name
                        else stop.remote()
                    )
                    await wait_within(
                        asyncio.wrap_future(ref.future()), self.config.stop_grace_s + 10
                    )
                except Exception as exc:  # a dead actor cannot answer; leases expire
                    log.warning("stopping %s failed: %r", member.name, exc)
            kill_actor(member.handle)
            member.handle = None


def _running_driver_indices(prefix: str, kind: str = "driver") -> list[int]:
    """Indices of ``<prefix>-<kind>-<i>`` actors alive in this namespace (none outside Ray)."""
    try:
        import ray

        names = ray.util.list_named_actors() if ray.is_initialized() else []
    except Exception:  # no cluster state to read: start from the configured count
        return []
    head = f"{prefix}-{kind}-"
    return [int(n[len(head) :]) for n in names if n.startswith(head) and n[len(head) :].isdigit()]


def _driver_factory(
    name: str,
    worker: Any,
    engine: Any,
    settings: Settings,
    cfg: RuntimeConfig,
    delivery_actor: str,
) -> Callable[[], Any]:
    scope = None if cfg.pool_routes else cfg.scope
    routes = [r.model_dump() for r in cfg.pool_routes] or None

    def create() -> Any:
        import ray

        from cluster.drivers import TaskDriver

        return (
            ray.remote(num_cpus=0)(TaskDriver)
            .options(
                name=name,
                lifetime="detached",
                get_if_exists=True,
                max_restarts=-1,
                max_concurrency=MAX_DRIVER_CONCURRENCY,
            )
            .remote(
                settings,
                worker,
                engine,
                admission_scope=scope,
                admission_routes=routes,
                delivery_actor=delivery_actor,
                ocr=cfg.ocr,
                actor_prefix=cfg.actor_prefix,
            )
        )

    return create


def _admission_factory(
    scope: str, limits: Mapping[str, Any], settings: Settings
) -> Callable[[], Any]:
    return lambda: _admission_actor(scope, limits, settings)


def _admission_actor(scope: str, limits: Mapping[str, Any], settings: Settings) -> Any:
    """The scope's one AdmissionActor (detached, get-if-exists, restarted by Ray).

    Its ledger needs the database URL as an argument, so unlike the other actors
    this one's creation arguments hold the URL: restrict who can read the GCS
    (Ray token authentication is on in the manifests).
    """
    from cluster.admission import actor_name, admission_actor

    return admission_actor(
        actor_name(scope),
        {"scope": scope, **limits},
        database_url=settings.database_url,
        detached=True,
    )


#: How often Serve health-checks the supervisor, i.e. how soon it starts an actor Ray
#: restarted (Ray brings the process back in 1-3 s; until ``start()`` a restarted driver
#: claims nothing). 15 s let a killed driver's work wait up to 15 s, past two 4 s leases
#: in the chaos run; a check is a ping per actor, so every 3 s costs nothing worth saving.
HEALTH_CHECK_PERIOD_S = 3.0


def build_runtime_app(config: RuntimeConfig) -> Application:
    """The bound Serve application: one supervisor replica, no HTTP route."""
    from ray import serve

    supervisor: Any = serve.deployment(RuntimeSupervisor)
    app: Application = supervisor.options(
        name=SUPERVISOR_DEPLOYMENT,
        num_replicas=1,
        max_ongoing_requests=8,
        ray_actor_options={"num_cpus": 0},
        health_check_period_s=HEALTH_CHECK_PERIOD_S,
        # A health check may replace and restart an actor (pool connect, engine handle).
        health_check_timeout_s=120,
        graceful_shutdown_timeout_s=60,
    ).bind(config.model_dump())
    return app


def runtime_app(args: dict[str, Any]) -> Application:
    """Serve application builder (``import_path: cluster.supervisor:runtime_app``).

    ``args`` are :class:`RuntimeConfig` fields; ``kuberay/generate.py`` writes
    them from the pools file (:func:`cluster.runtime_config.runtime_config_for`).
    """
    return build_runtime_app(RuntimeConfig.model_validate(args))


def deploy_runtime_app(config: RuntimeConfig, *, timeout_s: float = 300.0) -> None:
    """Deploy the runtime on the connected Ray cluster; return once every actor started.

    The supervisor's constructor starts all actors, so RUNNING means they run.
    """
    from deployments.serve_run import run_app

    run_app(build_runtime_app(config), APP_NAME, route_prefix=None, timeout_s=timeout_s)
