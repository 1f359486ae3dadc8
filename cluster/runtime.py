"""A local Fenceline cluster: Ray head, Serve apps, admission, drivers, maintenance, delivery.

``fenceline up`` and ``fenceline demo`` use :class:`LocalCluster`. On KubeRay the
same pieces start from the RayService / RayJob manifests in ``kuberay/``; this
module only decides how they are wired on one machine:

* Ray with ``num_cpus`` logical CPUs (default 4 on a 2-core machine: every
  actor and deployment asks for ``num_cpus=0`` anyway, so this only gives Ray
  headroom), no dashboard, capped object store;
* the inference app from the pools file (context-length router + one vLLM
  deployment per pool), then the intake ingress on 127.0.0.1:``http_port``;
* one admission actor per engine scope, the delivery actor, the maintenance
  actor (reaper + outbox relay) and ``drivers`` task drivers.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cluster.drivers import EngineSpec, build_driver, build_maintenance
from pipeline.settings import Settings
from pipeline.worker import WorkerConfig

log = logging.getLogger(__name__)

ADMISSION_SCOPE = "local-pool"


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


class LocalCluster:
    """Start/stop every long-running piece on the local Ray head."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.drivers: list[Any] = []
        self.driver_pids: list[int] = []
        self.maintenance: Any = None
        self.delivery: Any = None
        self.admission: Any = None
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
            t0 = time.monotonic()
            ray.init(
                num_cpus=cfg.ray_cpus,
                include_dashboard=False,
                object_store_memory=cfg.object_store_bytes,
                log_to_driver=False,
                runtime_env={"env_vars": _forwarded_env()},
            )
            self._owns_ray = True
            progress(f"ray: head started in {time.monotonic() - t0:.1f} s")
        serve.start(http_options={"host": cfg.http_host, "port": cfg.http_port})
        if cfg.engine.kind == "serve":
            from deployments.app import deploy_inference_app
            from deployments.pools import load_pools

            pools = load_pools(cfg.pools_file)
            if cfg.eager:
                pools = pools.eager()
            t0 = time.monotonic()
            progress(
                f"serve: deploying inference pools {[p.name for p in pools.pools]} "
                "(vLLM engine start takes ~1 min on CPU)"
            )
            deploy_inference_app(pools, timeout_s=cfg.deploy_timeout_s)
            progress(f"serve: inference app running after {time.monotonic() - t0:.1f} s")
        from deployments.intake import deploy_intake_app

        deploy_intake_app(
            {"database_url": cfg.settings.database_url}, timeout_s=cfg.deploy_timeout_s
        )
        progress(f"serve: intake API on {self.intake_url}")
        from cluster.admission import actor_name, admission_actor
        from cluster.delivery import build_delivery_actor

        self.admission = admission_actor(
            actor_name(ADMISSION_SCOPE),
            {"scope": ADMISSION_SCOPE, **cfg.admission},
            database_url=cfg.settings.database_url,
            detached=False,
        )
        ray.get(self.admission.start.remote())
        self.delivery = build_delivery_actor(cfg.settings)
        ray.get(self.delivery.start.remote())
        self.maintenance = build_maintenance(cfg.settings)
        ray.get(self.maintenance.start.remote())
        for i in range(cfg.drivers):
            worker = replace(cfg.worker, worker_id=f"{cfg.worker.worker_id}-{i}")
            actor = build_driver(
                cfg.settings,
                worker,
                cfg.engine,
                admission_scope=ADMISSION_SCOPE,
                delivery_actor="fenceline-delivery",
            )
            self.drivers.append(actor)
        self.driver_pids = list(ray.get([d.start.remote() for d in self.drivers]))
        progress(
            f"cluster: {len(self.drivers)} drivers (pids {self.driver_pids}), admission, "
            "delivery and maintenance actors running"
        )

    def driver_stats(self) -> list[dict[str, Any]]:
        import ray

        return list(ray.get([d.stats.remote() for d in self.drivers]))

    def stop(self) -> dict[str, Any]:
        import ray
        from ray import serve

        out: dict[str, Any] = {}
        if not ray.is_initialized():
            return out
        try:
            out["drivers"] = ray.get([d.stop.remote(10.0) for d in self.drivers], timeout=60)
        except Exception as exc:  # a killed driver cannot answer; its leases expire
            out["drivers_error"] = repr(exc)
        for actor in (self.maintenance, self.delivery):
            if actor is not None:
                try:
                    ray.get(actor.stop.remote(), timeout=30)
                except Exception as exc:
                    log.warning("actor stop failed: %s", exc)
        if self._owns_ray:
            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()
        return out


def _forwarded_env() -> dict[str, str]:
    """Environment the actors and replicas need from the CLI process."""
    keep = ("FENCELINE_", "VLLM_", "HF_", "OMP_", "RAY_")
    return {k: v for k, v in os.environ.items() if k.startswith(keep)}
