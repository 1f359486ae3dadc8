"""Ray Serve ingress for the intake API: the FastAPI app of :mod:`pipeline.api.app`.

House style: :class:`IntakeIngress` is a plain class; ``serve.ingress`` and
``serve.deployment`` are applied in :func:`build_intake_app`. The FastAPI app
is built *inside each replica* (Serve's late-bound ``__serve_build_asgi_app__``),
because the app owns an asyncpg pool, a LISTEN connection and a Prometheus
registry that cannot be pickled into the deployment; Serve then runs the app's
lifespan, which creates the pool. The same app runs under plain uvicorn
(``uvicorn --factory pipeline.api.app:app_from_env``), so Serve adds routing and
replicas, never behaviour.

Replicas take ``num_cpus=0`` by default: the ingress is I/O-bound, and on small
machines a whole CPU per replica starves the engine deployments (Serve then
blocks forever; see MACHINE-NOTES).

Three ways to run it:

* in Python: ``deploy_intake_app({"database_url": ...}, timeout_s=120)`` (bounded);
* ``serve run deployments.intake:intake_app database_url=postgresql://...``;
* a Serve config whose application has ``import_path: deployments.intake:intake_app``
  and the settings overrides as ``args`` (KubeRay ``serveConfigV2``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from deployments.observability import start_observability
from deployments.ray_metrics import bridge_to_ray
from pipeline.api import create_app
from pipeline.settings import Settings

if TYPE_CHECKING:
    from ray.serve import Application

#: Serve's own knobs for an HTTP ingress replica (read when the replica process
#: starts, so they travel in its ``runtime_env``): run the app on the replica's
#: main event loop instead of a second one in its own thread (one loop hop less
#: per request), and buffer Serve's per-request access log lines.
REPLICA_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000",
}

#: The same for the cluster, read by Serve's controller and proxies from the head's
#: environment: :func:`proxy_env_defaults` sets them before ``ray.init`` unless
#: already set. ``RAY_SERVE_ENABLE_HA_PROXY``: HAProxy listens on the HTTP port
#: and forwards each request to an intake replica that serves HTTP itself
#: (Serve's direct ingress), instead of Serve's Python proxy relaying every
#: request to the replica over Ray; the proxy actor only configures HAProxy.
#: Measured on 2 cores: 0.80x plain uvicorn against 0.42-0.44x through the
#: Python proxy (docs/history/benchmarks-passes.md, "Intake through HAProxy"). A replica being
#: removed stays reachable for the draining period, then refuses new
#: connections, which HAProxy retries on another replica; 2 s is enough for the
#: proxy on the same machine (Ray's default, 30 s, is for load balancers
#: outside the cluster and stays in force on KubeRay).
#: ``RAY_SERVE_HAPROXY_METRICS_ENABLED``: off, so HAProxy does not format a
#: metrics datagram per request for Serve's HAProxy manager to parse; the
#: intake replica then records Serve's HTTP request metrics itself (direct
#: ingress does when HAProxy's are off), and Fenceline's own acceptance counter
#: and histogram are unchanged. Measured at 200 accepts/s on 2 cores: HAProxy
#: 0.23-0.31 ms of CPU per request against 0.28-0.34, the replica's no more,
#: p99 median 59 ms against 100 (docs/history/benchmarks-passes.md, "Eighth pass"). What
#: HAProxy answers itself (its health check, a 503 with no replica up) is no
#: longer in Serve's metrics locally; KubeRay keeps them on (its ConfigMap).
PROXY_ENV = {
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000",
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
    "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0",
    # uvicorn believes X-Forwarded-For/-Proto from any peer on 127.0.0.1 or ::1 by
    # default; the intake trusts only FENCELINE_TRUSTED_PROXIES
    # (pipeline/api/client_origin.py), so Serve's own HTTP servers trust none.
    "FORWARDED_ALLOW_IPS": "",
}

#: Ports HAProxy and Serve's fallback proxy bind besides the HTTP port. Ray's
#: defaults are fixed (8404, 9101, 8500, 9500), so a second cluster on the same
#: machine (a test beside ``fenceline up``) could not start its HAProxy: each
#: head gets free ones instead.
PROXY_PORT_ENV = (
    "RAY_SERVE_HAPROXY_STATS_PORT",
    "RAY_SERVE_HAPROXY_METRICS_PORT",
    "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT",
    "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT",
)

#: HAProxy's files, by default all under ``/tmp/haproxy-serve``: one folder per head.
PROXY_PATH_ENV = {
    "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": "haproxy.cfg",
    "RAY_SERVE_HAPROXY_SOCKET_PATH": "admin.sock",
    "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": "",
    "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": "server-state",
    "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": "metrics.sock",
}

INGRESS_DEPLOYMENT = "intake"
APP_NAME = "intake"
IMPORT_PATH = "deployments.intake:intake_app"


class IntakeIngress:
    """Holds the settings overrides; builds the FastAPI app in the replica.

    Args:
        overrides: ``Settings`` field values (JSON-able); everything else comes from
            the replica's ``FENCELINE_*`` environment, so secrets travel in the
            ``runtime_env`` rather than in the deployment's arguments.
    """

    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self._settings = Settings(**(overrides or {}))
        start_observability(self._settings, "fenceline-intake")

    def __serve_build_asgi_app__(self) -> FastAPI:
        # No with_frozen_heap here: Serve freezes a replica's heap itself once the
        # user code has started (RAY_SERVE_FREEZE_GC_ON_STARTUP, on by default).
        return with_ray_metrics(create_app(self._settings))


def with_ray_metrics(app: FastAPI) -> FastAPI:
    """Bridge the app's registry into Ray's metrics agent while the app runs.

    The bridge is an asyncio task, so it starts in the app's lifespan (the
    replica's event loop), not in the constructor; outside Ray it is None and
    ``/metrics`` still serves the registry. Through the agent, Prometheus sees
    every replica's series from one scrape of each node, instead of one replica
    per scrape of the Serve route.
    """
    inner = app.router.lifespan_context
    registry = app.state.fenceline.metrics.registry

    @contextlib.asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
        async with inner(a) as state:
            bridge = bridge_to_ray(registry)
            try:
                yield state
            finally:
                if bridge is not None:
                    bridge.stop()

    app.router.lifespan_context = lifespan
    return app


def proxy_env_defaults(environ: dict[str, str] | None = None) -> None:
    """Set :data:`PROXY_ENV`, free ports and a private HAProxy folder where unset.

    Call before ``ray.init`` starts the head: the controller and the proxy
    inherit the raylet's environment. An operator's own value wins.
    """
    env: Any = os.environ if environ is None else environ
    for key, value in PROXY_ENV.items():
        env.setdefault(key, value)
    if env.get("RAY_SERVE_ENABLE_HA_PROXY") != "1":
        return
    for key in PROXY_PORT_ENV:
        if key not in env:
            env[key] = str(_free_port())
    if not all(key in env for key in PROXY_PATH_ENV):
        folder = tempfile.mkdtemp(prefix="fl-haproxy-")
        for key, name in PROXY_PATH_ENV.items():
            env.setdefault(key, os.path.join(folder, name) if name else folder)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def build_intake_app(
    overrides: dict[str, Any] | None = None,
    *,
    num_replicas: int = 1,
    num_cpus: float = 0,
    max_ongoing_requests: int = 256,
    access_log: bool = False,
) -> Application:
    """The bound Serve application: one ingress deployment serving ``pipeline.api.app``.

    ``access_log``: Serve's own line per request in the replica's log (off by
    default: it cost 4 % of the replica's samples at 170 accepts/s on two cores,
    and every accepted job is recorded anyway, in its ``job_events`` and the
    ``fenceline_jobs_accepted_total`` and acceptance-latency metrics).
    """
    from ray import serve

    ingress: Any = serve.deployment(serve.ingress()(IntakeIngress))
    app: Application = ingress.options(
        name=INGRESS_DEPLOYMENT,
        num_replicas=num_replicas,
        max_ongoing_requests=max_ongoing_requests,
        logging_config={"enable_access_log": access_log},
        ray_actor_options={"num_cpus": num_cpus, "runtime_env": {"env_vars": dict(REPLICA_ENV)}},
    ).bind(dict(overrides or {}))
    return app


def intake_app(args: dict[str, Any]) -> Application:
    """Serve application builder (``import_path: deployments.intake:intake_app``).

    ``args`` are ``Settings`` overrides, plus the optional deployment knobs
    ``num_replicas``, ``num_cpus`` and ``access_log`` (true: Serve logs each request).
    """
    overrides = dict(args)
    replicas = int(overrides.pop("num_replicas", 1))
    cpus = float(overrides.pop("num_cpus", 0))
    access_log = overrides.pop("access_log", False) in (True, "true", "1")
    return build_intake_app(overrides, num_replicas=replicas, num_cpus=cpus, access_log=access_log)


def deploy_intake_app(
    overrides: dict[str, Any] | None = None,
    *,
    route_prefix: str = "/",
    timeout_s: float = 120.0,
    poll_s: float = 0.5,
    **options: Any,
) -> None:
    """Deploy on the connected Ray cluster and wait, bounded, until the app runs.

    Raises:
        TimeoutError: not RUNNING within ``timeout_s`` (``serve.run`` itself would
            wait forever when replicas cannot be scheduled).
        RuntimeError: Serve reported DEPLOY_FAILED; the message carries its reason.
    """
    from deployments.serve_run import run_app

    app = build_intake_app(overrides, **options)
    run_app(app, APP_NAME, route_prefix=route_prefix, timeout_s=timeout_s, poll_s=poll_s)
