"""Serve really runs the engines' autoscaling policy: 1 → 2 replicas on queue or KV and back.

A real local Ray + Serve (a Ray of our own, ``num_cpus=2``, replicas at
``num_cpus=0``, no HTTP proxy) deploys :class:`deployments.engine.PoolEngine` exactly
as the inference app does (``pool.deployment_options()``, so the pool's
``autoscaling_config`` with the custom policy) — once from Python as ``fenceline up``
does, once from a Serve config as KubeRay's ``serveConfigV2`` does — over
:class:`tests.support.slot_engine.SlotEngine`: a slot scheduler whose waiting
requests and KV usage reach Serve through the replica's ``record_autoscaling_stats``.

Two cases, one per signal. *Queue*: four requests on a one-slot replica leave three
waiting (target 1 per replica). *KV*: two requests fill a two-slot replica's KV cache
(1.0 > 0.8) with nothing waiting (target 4). Either way the policy wants a second
replica and Serve starts it after ``upscale_delay_s``. Serve's default policy would
not: 4 or 2 ongoing requests are under its ``target_ongoing_requests`` of 16. When
the requests are released the replicas report zeros and the pool drains back to
``min_replicas`` after ``downscale_delay_s``. Delays and push intervals are cut to
about a second so the test waits seconds; it prints the measured times.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deployments.engine import GenerateRequest
from deployments.engine_autoscaling import POLICY_PATH
from deployments.pools import PoolConfig
from tests.support.slot_engine import RELEASE_ENV, slot_app

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
APP = "engine-autoscaling-test"
#: Bounds on the measured times (s): generous for a loaded 2-core machine, where a new
#: replica's worker process takes seconds to start.
UP_WITHIN_S = 90.0
DOWN_WITHIN_S = 60.0


@pytest.fixture(scope="module")
def serve_cluster() -> Iterator[None]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    ray.init(
        address="local",  # a Ray of our own, never another engineer's
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
        namespace="test_engine_autoscaling",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
    )
    try:
        serve.start(proxy_location="Disabled")
        yield
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


def running_replicas(app_name: str = APP) -> int:
    from ray import serve
    from ray.serve._private.common import ReplicaState

    app = serve.status().applications.get(app_name)
    if app is None or "engine-short" not in app.deployments:
        return 0
    states: dict[Any, int] = app.deployments["engine-short"].replica_states
    return states.get(ReplicaState.RUNNING, 0)


def wait_for(condition: Callable[[], bool], within: float, what: str) -> float:
    """Seconds until ``condition()`` holds (polled every 0.25 s); fails after ``within``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within:
            pytest.fail(f"{what} not within {within:.0f} s (running: {running_replicas()})")
        time.sleep(0.25)
    return time.monotonic() - started


def deploy(pool: PoolConfig, how: str) -> None:
    """The pool's engine as ``fenceline up`` deploys it (``python``: the bound app), or as
    KubeRay does (``config``: a Serve config whose ``deployments`` are what
    ``kuberay.generate`` writes into ``serveConfigV2``, applied by Serve's controller)."""
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ApplicationStatus, ServeDeploySchema

    from deployments.serve_run import run_app
    from kuberay.generate import built_deployments

    args = {"pool": pool.model_dump(mode="json")}
    if how == "python":
        run_app(slot_app(args), APP, route_prefix=None, timeout_s=120)
        return
    import_path = "tests.support.slot_engine:slot_app"
    (options,) = built_deployments(import_path, args, APP)
    assert options["autoscaling_config"]["policy"]["policy_function"] == POLICY_PATH
    application = {"name": APP, "import_path": import_path, "route_prefix": None}
    application |= {"args": args, "deployments": [options]}
    client: Any = _get_global_client()
    client.deploy_apps(ServeDeploySchema.model_validate({"applications": [application]}))

    def running() -> bool:
        from ray import serve

        app = serve.status().applications.get(APP)
        if app is not None and app.status == ApplicationStatus.DEPLOY_FAILED:
            pytest.fail(f"config deploy failed: {app.message}")
        return app is not None and app.status == ApplicationStatus.RUNNING

    wait_for(running, 120, "the config-deployed app")


@pytest.mark.parametrize(
    ("signal", "max_num_seqs", "target_waiting", "requests", "how"),
    [
        # One slot: 1 running, 3 waiting (> 1 per replica); KV at 1.0 too, but the
        # queue alone asks for 1 + ceil((3 - 1) / 1) = 3, clamped to 2.
        ("queue", 1, 1, 4, "python"),
        # Two slots, both running: nothing waits (target 4), KV 1.0 > 0.8 alone scales.
        # Deployed from a Serve config, as KubeRay's serveConfigV2 deploys the engines.
        ("kv", 2, 4, 2, "config"),
    ],
)
def test_engine_stats_scale_the_pool_up_and_an_idle_pool_back_down(
    serve_cluster: None,
    tmp_path: Path,
    signal: str,
    max_num_seqs: int,
    target_waiting: int,
    requests: int,
    how: str,
) -> None:
    from ray import serve

    release = tmp_path / "release"
    pool = PoolConfig.model_validate(
        {
            "name": "short",
            "max_model_len": 512,
            "max_num_seqs": max_num_seqs,
            "max_ongoing_requests": 16,
            "env": {RELEASE_ENV: str(release)},
            "autoscaling": {
                "min_replicas": 1,
                "max_replicas": 2,
                "target_waiting_per_replica": target_waiting,
                "target_kv_usage": 0.8,
                "upscale_delay_s": 1,
                "downscale_delay_s": 2,
                "look_back_period_s": 1,
                "metrics_interval_s": 0.5,
            },
        }
    )
    deploy(pool, how)
    assert running_replicas() == 1
    handle = serve.get_app_handle(APP)

    sent = time.monotonic()
    responses = [
        handle.generate.remote(
            GenerateRequest(
                messages=[{"role": "user", "content": f"invoice {i}"}],
                json_schema={"type": "object"},
                max_tokens=16,
                timeout=240,
                prompt_token_ids=[1, 2, 3],
            )
        )
        for i in range(requests)
    ]
    up_s = wait_for(lambda: running_replicas() == 2, UP_WITHIN_S, "scale-up to 2 replicas")
    time.sleep(2.0)
    assert running_replicas() == 2  # bounded by max_replicas

    release.touch()
    completions = [r.result(timeout_s=60) for r in responses]
    assert [c.text for c in completions] == ['{"ok": true}'] * requests
    drained = time.monotonic()
    down_s = wait_for(lambda: running_replicas() == 1, DOWN_WITHIN_S, "scale-down to 1 replica")
    print(
        f"engine autoscaling on {signal} ({how} deploy): 1 -> 2 replicas {up_s:.1f} s after "
        f"{requests} requests (upscale_delay_s 1); 2 -> 1 {down_s:.1f} s after the last answer "
        f"(downscale_delay_s 2); load 1-min {os.getloadavg()[0]:.2f}"
    )
    assert drained - sent > up_s
    serve.delete(APP)
