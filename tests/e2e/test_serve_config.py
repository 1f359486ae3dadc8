"""The dev overlay's serveConfigV2, deployed locally the way KubeRay deploys it.

KubeRay hands ``serveConfigV2`` to Serve's controller (``apply_config``, the
``serve deploy`` path). This module renders ``kuberay/overlays/dev``, takes the
RayService's ``serveConfigV2`` and the settings ConfigMap from it, changes
only what differs between a pod and this machine (HTTP bind address and port,
one proxy, the database URL and the model folder), and applies it to a Ray of
its own: the intake API, the inference app (two pools of the bundled SmolLM2
sharing one vLLM CPU engine, from ``deployments/pools.yaml``) and the job runtime all start
from their import paths. Then one invoice goes through HTTP intake → runtime
driver → router → vLLM, and a driver killed with SIGKILL is restarted and
started again by the runtime supervisor.

Engine start dominates (1–2 min on 2 cores with torch.compile; much longer on a
loaded machine), so the module deploys once.
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from benchmarks.infra import free_port
from benchmarks.invoices.generator import generate_invoice
from deployments import model_prepare
from kuberay.kustomize import render
from pipeline.states import SETTLED
from tests.support.api import tenant_with_key

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.integration,
    pytest.mark.timeout(1500),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_TIMEOUT_S = 720.0
ATTEMPT_TIMEOUT_S = 420.0


@dataclass
class Deployed:
    config: dict[str, Any]
    url: str
    deploy_s: float


def dev_overlay() -> tuple[dict[str, Any], dict[str, str]]:
    """(serveConfigV2, settings ConfigMap data) exactly as the dev overlay renders them."""
    docs = render(ROOT / "kuberay" / "overlays" / "dev")
    (rs,) = [d for d in docs if d["kind"] == "RayService"]
    # The overlay also ships the Grafana dashboard as a ConfigMap: take the settings.
    (settings,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "fenceline-settings"
    ]
    return yaml.safe_load(rs["spec"]["serveConfigV2"]), dict(settings["data"])


def deployed_settings() -> dict[str, str]:
    """The settings ConfigMap of the dev overlay (what the pods read)."""
    return dev_overlay()[1]


def wait_running(names: set[str], timeout_s: float) -> None:
    from ray import serve
    from ray.serve.schema import ApplicationStatus

    deadline = time.monotonic() + timeout_s
    while True:
        apps = serve.status().applications
        states = {n: apps[n].status if n in apps else "absent" for n in names}
        failed = {n: apps[n].message for n in names if states[n] == ApplicationStatus.DEPLOY_FAILED}
        assert not failed, f"deploy failed: {failed}"
        if all(s == ApplicationStatus.RUNNING for s in states.values()):
            return
        assert time.monotonic() < deadline, f"not running after {timeout_s:.0f} s: {states}"
        time.sleep(2.0)


@pytest.fixture(scope="module")
def deployed(module_dsn: str) -> Iterator[Deployed]:
    config, settings = dev_overlay()
    model_dir = model_prepare.prepare()  # idempotent; `make test` ran it already
    env = {
        **settings,
        "FENCELINE_MODEL_CACHE": str(model_dir),  # the image has it under /opt
        "FENCELINE_DATABASE_URL": module_dsn,  # a Secret in the cluster
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    saved = {k: os.environ.get(k) for k in env}
    cwd = Path.cwd()
    # Ray processes inherit this environment and working directory, as Ray pods
    # inherit the container's (envFrom Secrets/ConfigMap, workingDir /app).
    os.environ.update(env)
    os.chdir(ROOT)
    local = copy.deepcopy(config)
    port = free_port()
    local["http_options"] = {"host": "127.0.0.1", "port": port}
    local["proxy_location"] = "HeadOnly"  # one node

    import ray
    from ray import serve
    from ray.serve._private.api import serve_start
    from ray.serve.schema import ServeDeploySchema

    ray.init(
        address="local",  # a Ray of our own, never another engineer's
        # Serve's controller and replicas inherit this job's namespace, and the
        # runtime's detached actors are named in it: a named one, not anonymous.
        namespace="fenceline-e2e",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=200 * 1024**2,
        log_to_driver=False,
    )
    try:
        started = time.monotonic()
        client = serve_start(http_options=local["http_options"])
        client.deploy_apps(ServeDeploySchema.model_validate(local))
        wait_running({a["name"] for a in local["applications"]}, DEPLOY_TIMEOUT_S)
        yield Deployed(config, f"http://127.0.0.1:{port}", time.monotonic() - started)
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_every_application_and_deployment_of_the_manifest_runs(deployed: Deployed):
    from ray import serve

    status = serve.status().applications
    for app in deployed.config["applications"]:
        running = status[app["name"]]
        assert {d["name"] for d in app["deployments"]} == set(running.deployments), app["name"]
        assert all(d.status == "HEALTHY" for d in running.deployments.values()), app["name"]
    runtime = serve.get_app_handle("fenceline-runtime").status.remote().result(timeout_s=60)
    args = next(a for a in deployed.config["applications"] if a["name"] == "fenceline-runtime")
    drivers = {n for n in runtime["actors"] if "-driver-" in n}
    # Autoscaled (docs/kuberay.md): it starts at the generated count and may have
    # drained idle drivers toward the overlay's minimum since.
    low = int(deployed_settings()["FENCELINE_DRIVER_MIN"])
    assert low <= len(drivers) <= args["args"]["drivers"], drivers
    assert all(runtime["actors"].values()), runtime["actors"]


async def test_an_invoice_goes_through_intake_runtime_router_and_vllm(
    deployed: Deployed, module_dsn: str
):
    """One job: accepted over HTTP, claimed by a runtime driver, answered by a vLLM pool.

    The test waits for the first *finished* attempt, not for the job to settle:
    whether SmolLM2-135M's answer validates, or is cut at max_tokens and retried,
    is the model's quality, and five CPU attempts take many minutes. An attempt
    that ended with tokens the engine generated proves every hop the manifest
    wires; one that timed out (no tokens) fails the test.
    """
    pool = await asyncpg.create_pool(module_dsn, min_size=1, max_size=2)
    try:
        tenant = await tenant_with_key(pool)
        invoice = generate_invoice(seed=7, line_items=2)
        async with httpx.AsyncClient(base_url=deployed.url, timeout=30) as http:
            r = await http.post(
                "/v1/extraction-jobs",
                headers={**tenant.headers, "Idempotency-Key": "kuberay-e2e-1"},
                json={"document": {"text": invoice.ocr_text, "filename": "invoice.txt"}},
            )
            assert r.status_code == 202, r.text
            job_id = uuid.UUID(r.json()["job_id"])
        deadline = time.monotonic() + ATTEMPT_TIMEOUT_S
        while True:
            async with pool.acquire() as conn:
                attempts = await conn.fetch(
                    "SELECT worker_id, engine, completion_tokens, outcome, error_class,"
                    " error_detail FROM job_attempts WHERE job_id = $1 ORDER BY fence",
                    job_id,
                )
                state = await conn.fetchval(
                    "SELECT state FROM extraction_jobs WHERE id = $1", job_id
                )
            ended = [a for a in attempts if a["outcome"] != "running"]
            if ended:
                break
            assert time.monotonic() < deadline, f"no attempt finished: {state} {attempts}"
            await asyncio.sleep(2.0)
    finally:
        await pool.close()
    first = ended[0]
    # The runtime application's drivers ran it ...
    assert first["worker_id"].startswith("fenceline-driver-"), first
    # ... on one of the inference application's engine pools, which answered: a settled
    # attempt records the pool ("short"), a failed one the engine ("vllm:short").
    answered_by = first["engine"] or first["error_detail"] or ""
    assert re.search(r"\b(vllm:)?(short|long)\b", answered_by), dict(first)
    assert first["outcome"] in {"succeeded", "review_required", "retry_scheduled"}, dict(first)
    # ... and generated: a retry after a truncated or malformed answer records the tokens
    # it was billed, an attempt that timed out on a stalled engine records none.
    assert (first["completion_tokens"] or 0) > 0, dict(first)
    if first["outcome"] != "retry_scheduled":
        assert state in {s.value for s in SETTLED}


def test_a_crashed_driver_is_restarted_and_started_again(deployed: Deployed):
    import signal

    import ray
    from ray import serve

    driver = ray.get_actor("fenceline-driver-0")  # the job's namespace, as the replicas'
    before = ray.get(driver.stats.remote(), timeout=30)
    assert before["running"]
    os.kill(before["pid"], signal.SIGKILL)  # a crash, not a graceful stop
    report = serve.get_app_handle("fenceline-runtime").reconcile.remote().result(timeout_s=180)
    # driver-0 is never drained first (the fleet drains the highest names).
    assert set(report) >= {"fenceline-driver-0", "fenceline-maintenance"}
    after = ray.get(driver.stats.remote(), timeout=30)
    assert after["running"] and after["pid"] != before["pid"]
    assert after["worker_id"] == before["worker_id"]  # the same named actor, restarted by Ray
