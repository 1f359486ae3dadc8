"""A local Fenceline cluster: Ray head, Serve apps, admission, drivers, maintenance, delivery.

``fenceline up`` and ``fenceline demo`` use :class:`LocalCluster`. It deploys the
same three Serve applications a KubeRay ``RayService`` deploys from
``serveConfigV2`` (``kuberay/``): the inference app from the pools file
(context-length router + one vLLM deployment per pool; left out when drivers
call an OpenAI-compatible provider instead), the intake ingress on
127.0.0.1:``http_port``, and the job runtime
(:mod:`cluster.supervisor`), whose supervisor replica creates and health-checks
the admission, delivery and maintenance actors and the task drivers. One code
path starts the runtime on a laptop and on a cluster; this module only decides
how it is wired on one machine:

* Ray with ``num_cpus`` logical CPUs (default 4 on a 2-core machine: every
  actor and deployment asks for ``num_cpus=0`` anyway, so this only gives Ray
  headroom), no dashboard, capped object store, namespace ``fenceline``;
* the settings travel to every actor and replica as ``FENCELINE_*`` variables in
  the job's ``runtime_env`` (:meth:`Settings.to_env`), which the runtime's
  :class:`~cluster.supervisor.EnvironmentSettings` read back.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.admission import engine_scopes_for
from cluster.drivers import EngineSpec
from cluster.runtime_config import RuntimeConfig
from pipeline.settings import Settings
from pipeline.worker import WorkerConfig

if TYPE_CHECKING:
    from deployments.pools import PoolsConfig

log = logging.getLogger(__name__)

NAMESPACE = "fenceline"


@dataclass
class ClusterConfig:
    settings: Settings
    pools_file: Path | None = None
    drivers: int = 2
    worker: WorkerConfig = field(default_factory=lambda: WorkerConfig(worker_id="driver"))
    engine: EngineSpec = field(default_factory=EngineSpec)
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    ray_cpus: int = 4
    object_store_bytes: int = 200 * 1024 * 1024
    admission: dict[str, Any] = field(default_factory=dict)
    deploy_timeout_s: float = 600.0
    #: Start the engines without torch.compile (see :meth:`PoolsConfig.eager`).
    eager: bool = False
    #: Deploy only these pools of the pools file (see :meth:`PoolsConfig.only`); None: all.
    pools: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # A request's model_policy may name any pool this cluster deploys: the intake
        # refuses other names (FENCELINE_MODEL_POOLS reaches it through to_env()).
        if self.engine.kind == "serve" and not self.settings.model_pools:
            names = tuple(p.name for p in self.serve_pools().pools)
            self.settings = self.settings.model_copy(update={"model_pools": names})

    def serve_pools(self) -> PoolsConfig:
        """The inference pools this cluster deploys."""
        from deployments.pools import load_pools

        pools = load_pools(self.pools_file)
        if self.pools is not None:
            pools = pools.only(self.pools)
        return pools.eager() if self.eager else pools

    def runtime(self) -> RuntimeConfig:
        """The runtime app's ``args``: drivers, engine and worker knobs of this config."""
        tunables = {
            f.name: getattr(self.worker, f.name)
            for f in fields(WorkerConfig)
            if f.name not in ("worker_id", "concurrency", "claim_batch")
        }
        scopes: dict[str, Any] = {}
        if self.engine.kind == "serve":
            # Per engine, by tokens: the budget comes from the pools' KV caches and
            # ``admission`` adds the rest (TTL, weights, a tighter max_in_flight).
            pools = self.serve_pools()
            engine_scopes, routes = engine_scopes_for(pools, overrides=self.admission)
            # A pools file with an ``ocr:`` pool runs it here too (its replicas then
            # need the ``fenceline-ocr`` resource or ``resource: null``); else in process.
            scopes = {"engine_scopes": engine_scopes, "pool_routes": routes, "ocr": pools.ocr}
        return RuntimeConfig(
            **scopes,
            engine_app=self.engine.app_name,
            engine="serve" if self.engine.kind == "serve" else "openai",
            provider_url=self.engine.base_url,
            provider_model=self.engine.model or "default",
            drivers=self.drivers,
            concurrency=self.worker.concurrency,
            admission=self.admission,
            worker=tunables,
        )


class LocalCluster:
    """Start/stop the Serve applications of a Fenceline cluster on a local Ray head."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.runtime_config = config.runtime()
        self._owns_ray = False

    @property
    def intake_url(self) -> str:
        return f"http://{self.config.http_host}:{self.config.http_port}"

    def start(self, progress: Any = print) -> None:
        import ray
        from ray import serve

        cfg = self.config
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not ray.is_initialized():
            from deployments.intake import proxy_env_defaults

            proxy_env_defaults()  # before the head starts: the HTTP proxy inherits it
            t0 = time.monotonic()
            handlers = _signal_handlers()
            ray.init(
                num_cpus=cfg.ray_cpus,
                include_dashboard=False,
                object_store_memory=cfg.object_store_bytes,
                log_to_driver=False,
                namespace=NAMESPACE,
                runtime_env={"env_vars": {**forwarded_env(), **cfg.settings.to_env()}},
            )
            self._owns_ray = True
            _restore_signal_handlers(handlers)
            progress(f"ray: head started in {time.monotonic() - t0:.1f} s")
        serve.start(http_options={"host": cfg.http_host, "port": cfg.http_port})
        if cfg.engine.kind == "serve":
            from deployments.app import deploy_inference_app

            pools = cfg.serve_pools()
            t0 = time.monotonic()
            progress(
                f"serve: deploying inference pools {[p.name for p in pools.pools]} "
                f"({'eager' if cfg.eager else 'torch.compile'}; vLLM engine start takes "
                "~1 min on CPU)"
            )
            deploy_inference_app(pools, timeout_s=cfg.deploy_timeout_s)
            progress(f"serve: inference app running after {time.monotonic() - t0:.1f} s")
        from cluster.supervisor import deploy_runtime_app

        t0 = time.monotonic()
        deploy_runtime_app(self.runtime_config, timeout_s=cfg.deploy_timeout_s)
        progress(
            f"serve: runtime app running after {time.monotonic() - t0:.1f} s: "
            f"{self.runtime_config.drivers} drivers x {self.runtime_config.concurrency} leases "
            f"({self.runtime_config.engine} engine), admission, delivery and maintenance actors"
        )
        from deployments.intake import deploy_intake_app

        # The intake opens its whole pool at start: a burst's first accepts do not
        # each open a connection inside their transaction.
        pool = {"db_pool_min": max(cfg.settings.db_pool_min, cfg.settings.db_pool_max)}
        deploy_intake_app(
            {"database_url": cfg.settings.database_url, **pool}, timeout_s=cfg.deploy_timeout_s
        )
        progress(f"serve: intake API on {self.intake_url}")

    def driver_stats(self) -> list[dict[str, Any]]:
        """Stats of the drivers alive now: the autoscaler adds and drains them, so the
        generated count names drivers that may be gone (a drained one is skipped)."""
        import ray

        prefix = f"{self.runtime_config.actor_prefix}-driver-"
        out: list[dict[str, Any]] = []
        for name in sorted(n for n in ray.util.list_named_actors() if n.startswith(prefix)):
            try:
                ref: Any = ray.get_actor(name).stats.remote()
                got: list[dict[str, Any]] = ray.get([ref], timeout=60)
            except (ValueError, ray.exceptions.RayActorError):
                continue  # drained or stopping between the listing and the call
            out.extend(got)
        return out

    def stop(self) -> None:
        """Delete the runtime first (drivers finish or release their leases), then the rest."""
        import ray
        from ray import serve

        from cluster.supervisor import APP_NAME

        if not ray.is_initialized():
            return
        try:
            serve.delete(APP_NAME)  # waits for the supervisor's graceful shutdown
        except Exception as exc:  # a dead runtime cannot stop its drivers; leases expire
            log.warning("runtime app delete failed: %r", exc)
        if self._owns_ray:
            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()


def _signal_handlers() -> dict[int, Any]:
    """The process's SIGINT/SIGTERM handlers (main thread only: else nothing to keep)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore_signal_handlers(handlers: dict[int, Any]) -> None:
    """Put back what ``ray.init`` replaced.

    Ray installs a failure-signal handler for SIGTERM that logs a stack and
    aborts the process, so ``fenceline down`` (SIGTERM) would kill ``up`` before
    its drivers released their leases.
    """
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def forwarded_env() -> dict[str, str]:
    """Environment the actors and replicas need from the CLI process."""
    keep = ("FENCELINE_", "VLLM_", "HF_", "OMP_", "RAY_")
    return {k: v for k, v in os.environ.items() if k.startswith(keep)}
