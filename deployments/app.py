"""Builders for the inference app: router + one engine deployment per serving pool.

A pool with ``served_by`` gets no deployment of its own: the router's map sends
its requests to the serving pool's engine (:func:`pool_engines`), so routing by
length is unchanged while the pools share one engine.

House style: :class:`~deployments.engine.PoolEngine` and
:class:`~deployments.router.ContextRouter` are plain classes; Serve options are
applied here, from ``pools.yaml``, so the same file sizes local runs, KubeRay
and the CLI.

Three ways to run it:

* in Python: ``handle = deploy_inference_app(load_pools(), timeout_s=300)``
  (bounded: ``serve.run`` blocks forever when replicas cannot be scheduled);
* ``serve run deployments.app:inference_app pools_path=deployments/pools.yaml``;
* a Serve config (KubeRay ``serveConfigV2``) written by
  ``python -m deployments.app --out serve_config.yaml``, whose application has
  ``import_path: deployments.app:inference_app`` and ``args.pools_path``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from deployments.engine import PoolEngine
from deployments.pools import PoolConfig, PoolsConfig, load_pools, pools_path
from deployments.router import ContextRouter

if TYPE_CHECKING:
    from ray.serve import Application
    from ray.serve.handle import DeploymentHandle

ROUTER_DEPLOYMENT = "router"
IMPORT_PATH = "deployments.app:inference_app"

E = TypeVar("E")


def pool_engines(config: PoolsConfig, make_engine: Callable[[PoolConfig], E]) -> dict[str, E]:
    """Pool name → the engine serving it, making one engine per serving pool only.

    Pools ``served_by`` another get the very object made for that pool, so Serve
    builds a single deployment and hands the router the same handle for both.
    """
    engines = {pool.name: make_engine(pool) for pool in config.engine_pools()}
    return {pool.name: engines[config.serving_pool(pool.name).name] for pool in config.pools}


def build_inference_app(
    pools_file: str | Path | None = None, *, pools: PoolsConfig | None = None
) -> Application:
    """The bound Serve application: the router (ingress) over one engine per serving pool."""
    from ray import serve

    config = pools if pools is not None else load_pools(pools_file)
    engine_cls: Any = serve.deployment(PoolEngine)
    router_cls: Any = serve.deployment(ContextRouter)
    engines = pool_engines(
        config, lambda pool: engine_cls.options(**pool.deployment_options()).bind(pool.model_dump())
    )
    app: Application = router_cls.options(
        name=ROUTER_DEPLOYMENT,
        num_replicas=config.router.replicas,
        max_ongoing_requests=config.router.max_ongoing_requests,
        ray_actor_options={"num_cpus": config.router.num_cpus},
    ).bind(config.model_dump(), engines)
    return app


def inference_app(args: dict[str, Any]) -> Application:
    """Serve application builder (``import_path: deployments.app:inference_app``).

    ``args.pools_path`` names the pools file; without it ``$FENCELINE_POOLS`` or
    ``deployments/pools.yaml``.
    """
    return build_inference_app(args.get("pools_path"))


def deploy_inference_app(
    pools: PoolsConfig, *, timeout_s: float = 300.0, poll_s: float = 1.0
) -> DeploymentHandle[Any]:
    """Deploy the app on the connected Ray cluster and wait, bounded, until it runs.

    Raises:
        TimeoutError: the app was not RUNNING within ``timeout_s`` (the usual cause
            on small machines: replicas asking for more CPUs than the cluster has).
        RuntimeError: Serve reported DEPLOY_FAILED; the message carries its reason.
    """
    from ray import serve

    from deployments.serve_run import run_app

    run_app(
        build_inference_app(pools=pools),
        pools.app_name,
        route_prefix=None,
        timeout_s=timeout_s,
        poll_s=poll_s,
    )
    return serve.get_app_handle(pools.app_name)


def serve_config(
    pools_file: str | Path | None = None,
    *,
    working_dir: str | None = None,
    http_host: str = "0.0.0.0",
    http_port: int = 8000,
) -> dict[str, Any]:
    """A Serve config document (``serve deploy`` / KubeRay ``serveConfigV2``).

    ``working_dir`` (e.g. a zip URL of the repo) goes into the app's
    ``runtime_env`` so replicas can import ``deployments``/``pipeline``; leave it
    None when the image has the project installed.
    """
    path = pools_path(pools_file)
    config = load_pools(path)  # validate before anything is written
    app: dict[str, Any] = {
        "name": config.app_name,
        "import_path": IMPORT_PATH,
        "route_prefix": None,
        "args": {"pools_path": _portable(path)},
    }
    if working_dir is not None:
        app["runtime_env"] = {"working_dir": working_dir}
    return {
        "proxy_location": "HeadOnly",
        "http_options": {"host": http_host, "port": http_port},
        "applications": [app],
    }


def _portable(path: Path) -> str:
    """The pools path relative to the project root when inside it (as replicas see it)."""
    root = Path(__file__).resolve().parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def write_serve_config(
    out: str | Path, pools_file: str | Path | None = None, **kwargs: Any
) -> Path:
    target = Path(out)
    target.write_text(yaml.safe_dump(serve_config(pools_file, **kwargs), sort_keys=False))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the inference app's Serve config.")
    parser.add_argument("--pools", default=None, help="pools file (default deployments/pools.yaml)")
    parser.add_argument("--out", default="-", help="output file, - for stdout")
    parser.add_argument("--working-dir", default=None)
    args = parser.parse_args(argv)
    document = serve_config(args.pools, working_dir=args.working_dir)
    text = yaml.safe_dump(document, sort_keys=False)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
