"""The intake API through Ray Serve: a local Serve app on its own Ray instance.

POST → GET round trip through Serve's HTTP ingress as ``fenceline up`` sets it
up (HAProxy on the port, the replica serving HTTP itself), and the SSE stream of a job
that the test drives with the job store directly: READY → RUNNING → SUCCEEDED,
then the stream ends. Ray is our own (``address="local"``), with
``num_cpus=2`` and the ingress at ``num_cpus=0`` (MACHINE-NOTES: on two cores a
whole CPU per replica deadlocks Serve), and is shut down by this module only.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.infra import free_port
from deployments.intake import deploy_intake_app, proxy_env_defaults
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from tests.support.api import iter_sse, read_sse, submission, tenant_with_key

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def serve_url(module_dsn: str) -> Iterator[str]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    proxy_env_defaults()  # as `fenceline up`: HAProxy in front of the replica
    ray.init(
        address="local",  # a Ray of our own, never another engineer's
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
        log_to_driver=False,
    )
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        started = time.monotonic()
        deploy_intake_app(
            {"database_url": module_dsn, "sse_poll_seconds": 1.0, "db_pool_max": 4},
            timeout_s=120,
        )
        print(f"intake app running after {time.monotonic() - started:.1f} s")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


def listener_of(url: str) -> str:
    """Name of the process listening on ``url``'s port."""
    import psutil

    port = int(url.rsplit(":", 1)[1])
    for c in psutil.net_connections("tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid:
            return psutil.Process(c.pid).name()
    raise AssertionError(f"nothing listens on {port}")


async def test_post_get_round_trip_and_sse_through_serve(serve_url: str, module_dsn: str) -> None:
    pool = await create_pool(module_dsn, min_size=1, max_size=4)
    try:
        tk = await tenant_with_key(pool)
        store = JobStore(pool)
        async with httpx.AsyncClient(base_url=serve_url, timeout=30) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert listener_of(serve_url) == "haproxy"  # not Serve's Python proxy
            # No metrics datagram per request (PROXY_ENV): HAProxy's configuration
            # renders no structured-data log line for Serve's manager to parse.
            folder = Path(os.environ["RAY_SERVE_HAPROXY_SERVER_STATE_BASE"])
            configs = [c.read_text() for c in folder.rglob("haproxy.cfg")]
            assert configs and all("frontend http_frontend" in c for c in configs)
            assert not any("log-format-sd" in c for c in configs)
            key = f"serve-{uuid.uuid4().hex[:8]}"
            headers = {**tk.headers, "Idempotency-Key": key}
            body = submission("INVOICE via Serve total 42.00 EUR")
            accepted = await client.post("/v1/extraction-jobs", json=body, headers=headers)
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["job_id"]
            location = accepted.headers["location"]
            status = await client.get(location, headers=tk.headers)
            assert status.status_code == 200
            assert status.json()["job_id"] == job_id and status.json()["state"] == "READY"
            replay = await client.post("/v1/extraction-jobs", json=body, headers=headers)
            assert replay.status_code == 200 and replay.json() == accepted.json()
            problem = await client.get(f"/v1/extraction-jobs/{uuid.uuid4()}", headers=tk.headers)
            assert problem.status_code == 404
            assert problem.headers["content-type"] == "application/problem+json"

            async with client.stream("GET", f"{location}/events", headers=tk.headers) as r:
                assert r.status_code == 200
                events = iter_sse(r)
                first = await anext(events)
                (lease,) = await store.claim("serve-e2e-worker")
                assert str(lease.job_id) == job_id
                await store.succeed(lease, result={"total": "42.00", "currency": "EUR"})
                rest = await read_sse(events, timeout=30)
            metrics = (await client.get("/metrics")).text
            final = await client.get(location, headers=tk.headers)
    finally:
        await pool.close()
    states = [e.data["state"] for e in [first, *rest] if e.event == "state"]
    assert states == ["READY", "RUNNING", "SUCCEEDED"]
    versions = [e.data["state_version"] for e in [first, *rest] if e.event == "state"]
    assert versions == sorted(versions)
    assert rest[-1].event == "end"
    assert final.json()["state"] == "SUCCEEDED"
    assert 'fenceline_acceptance_seconds_count{outcome="accepted"} 1.0' in metrics
