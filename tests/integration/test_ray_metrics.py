"""The metrics bridge in a real local Ray, read back from Ray's metrics agent.

Prometheus scrapes Ray's metrics agent (``metrics-export-port``); this module
starts a Ray of its own (one logical CPU, no dashboard, its own export port,
Ray's report interval cut to 1 s so the test waits seconds, not tens), runs the
bridge in an actor and the :class:`cluster.drivers.Maintenance` actor against a
real PostgreSQL, and parses what the agent serves: the names the docs promise
(``ray_`` prefix, ``_total`` on counters, ``le`` on histogram buckets) with the
values recorded.
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.infra import free_port
from pipeline.admission import AdmissionRequest
from pipeline.settings import Settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def metrics_port() -> Iterator[int]:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    port = free_port()
    ray.init(
        address="local",  # a cluster of our own, never another engineer's
        num_cpus=1,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
        namespace="test_ray_metrics",
        _metrics_export_port=port,
        _system_config={"metrics_report_interval_ms": 1000},
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
    )
    yield port
    ray.shutdown()


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    """The agent's samples, keyed by name and the labels that are not Ray's own."""
    ray_labels = {"Component", "NodeAddress", "SessionName", "Version", "WorkerId"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = frozenset(
                (k, v) for k, v in s.labels.items() if k not in ray_labels and "otel" not in k
            )
            out[(s.name, labels)] = s.value
    return out


async def until(port: int, expected: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> None:
    """Poll the agent until every expected sample has its value (Ray exports every 1 s)."""
    deadline = time.monotonic() + 60
    seen: Samples = {}
    while time.monotonic() < deadline:
        try:
            seen = await asyncio.to_thread(scrape, port)
        except OSError:  # the agent may still be starting
            seen = {}
        if all(seen.get(key) == pytest.approx(value) for key, value in expected.items()):
            return
        await asyncio.sleep(0.5)
    missing = {k: (v, seen.get(k)) for k, v in expected.items() if seen.get(k) != v}
    fenceline = {k: v for k, v in seen.items() if "fenceline" in k[0]}
    raise AssertionError(f"not exported (expected, seen): {missing}; fenceline series: {fenceline}")


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(labels.items()))


class Bridged:
    """An actor body owning a registry, bridged into Ray as a replica's would be."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.waiting = Gauge("fenceline_t_waiting", "w", ["pool"], registry=r).labels("short")
        self.tokens = Counter("fenceline_t_tokens", "t", ["pool"], registry=r).labels("short")
        self.wait = Histogram(
            "fenceline_t_wait_seconds", "s", ["pool"], buckets=(0.1, 1.0), registry=r
        ).labels("short")
        Gauge("other_t_gauge", "not bridged", registry=r).set(1)
        self.bridge: Any = None

    async def start(self) -> bool:
        from deployments.ray_metrics import bridge_to_ray

        self.bridge = bridge_to_ray(self.registry, interval_s=0.2)
        return self.bridge is not None and bool(self.bridge.running)

    async def record(self, waiting: float, tokens: float, waits: list[float]) -> int:
        self.waiting.set(waiting)
        self.tokens.inc(tokens)
        for w in waits:
            self.wait.observe(w)
        rounds = int(self.bridge.rounds)
        await self.bridge.wait_rounds(rounds + 1)
        return rounds


async def test_the_agent_exports_bridged_samples_under_their_documented_names(
    metrics_port: int,
) -> None:
    import ray

    actor: Any = ray.remote(num_cpus=0)(Bridged).remote()
    try:
        assert await actor.start.remote() is True
        await actor.record.remote(3, 5, [0.05, 0.5, 2.0])
        await until(
            metrics_port,
            {
                key("ray_fenceline_t_waiting", pool="short"): 3,
                key("ray_fenceline_t_tokens_total", pool="short"): 5,
                key("ray_fenceline_t_wait_seconds_bucket", pool="short", le="0.1"): 1,
                key("ray_fenceline_t_wait_seconds_bucket", pool="short", le="1.0"): 2,
                key("ray_fenceline_t_wait_seconds_bucket", pool="short", le="+Inf"): 3,
                key("ray_fenceline_t_wait_seconds_count", pool="short"): 3,
                key("ray_fenceline_t_wait_seconds_sum", pool="short"): 2.55,
            },
        )
        # Increases, not totals: 5 + 2 is 7 in Ray (re-adding totals would give 12).
        await actor.record.remote(1, 2, [])
        await until(
            metrics_port,
            {
                key("ray_fenceline_t_tokens_total", pool="short"): 7,
                key("ray_fenceline_t_waiting", pool="short"): 1,
            },
        )
        names = {name for name, _ in await asyncio.to_thread(scrape, metrics_port)}
        assert not {n for n in names if "other_t_gauge" in n}  # outside the prefix
        assert not {n for n in names if n.startswith("ray_fenceline_t") and "created" in n}
    finally:
        ray.kill(actor)


async def test_the_maintenance_actor_exports_its_broker_path_metrics(
    metrics_port: int, dsn: str
) -> None:
    import ray

    from cluster.drivers import build_maintenance

    actor = build_maintenance(
        Settings(database_url=dsn, amqp_url=None), name="fenceline-maintenance-metrics-test"
    )
    try:
        await actor.start.remote()
        assert "RegistryBridge" in await actor.services.remote()
        # The relay's gauges exist from its first poll; an empty outbox reads 0.
        await until(
            metrics_port,
            {
                key("ray_fenceline_outbox_unpublished_events"): 0,
                key("ray_fenceline_outbox_oldest_unpublished_seconds"): 0,
            },
        )
        await actor.stop.remote()
        assert "RegistryBridge" not in await actor.services.remote()
    finally:
        ray.kill(actor)


class IntakeInRay:
    """An actor running the intake app as its Serve replica does (lifespan included)."""

    def __init__(self, dsn: str) -> None:
        from deployments.intake import with_ray_metrics
        from pipeline.api import create_app

        self.app = with_ray_metrics(create_app(Settings(database_url=dsn)))
        self._lifespan: Any = None

    async def start(self) -> None:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()

    async def unauthorised_post(self) -> int:
        import httpx

        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://intake") as http:
            r = await http.post("/v1/extraction-jobs", json={"document": {"text": "x"}})
            return r.status_code

    async def stop(self) -> None:
        await self._lifespan.__aexit__(None, None, None)


async def test_the_intake_replica_exports_its_acceptance_series(
    metrics_port: int, dsn: str
) -> None:
    """The intake's registry reaches Ray's agent while the app runs (its lifespan starts
    the bridge), so one scrape per node sees every replica's acceptance SLI."""
    import ray

    actor: Any = ray.remote(num_cpus=0)(IntakeInRay).remote(dsn)
    try:
        await actor.start.remote()
        assert await actor.unauthorised_post.remote() == 401
        assert await actor.unauthorised_post.remote() == 401
        await until(
            metrics_port,
            {
                key("ray_fenceline_acceptance_seconds_count", outcome="invalid"): 2,
                key("ray_fenceline_jobs_rejected_total", reason="unauthorized"): 2,
            },
        )
        await actor.stop.remote()
    finally:
        ray.kill(actor)


async def test_the_admission_actor_exports_usage_against_its_limits(metrics_port: int) -> None:
    """Where the admission actor runs, its usage-vs-limit gauges reach Ray's agent."""
    import ray

    from cluster.admission import admission_actor

    actor = admission_actor(
        "fenceline-admission-metrics-test",
        {"scope": "metrics-test", "rpm": 60, "tpm": 10_000, "max_in_flight": 4},
        detached=False,
    )
    try:
        grant = await actor.acquire.remote(AdmissionRequest("tenant-a", 1_200, 300), timeout=5)
        assert grant.reserved_tokens == 1_500
        assert (await actor.snapshot.remote())["metrics_bridged"] is True
        scope = "metrics-test"
        await until(
            metrics_port,
            {
                key("ray_fenceline_admission_usage", scope=scope, dimension="tpm"): 1_500,
                key("ray_fenceline_admission_usage", scope=scope, dimension="rpm"): 1,
                key("ray_fenceline_admission_usage", scope=scope, dimension="permits"): 1,
                key("ray_fenceline_admission_limit", scope=scope, dimension="tpm"): 10_000,
                key("ray_fenceline_admission_limit", scope=scope, dimension="permits"): 4,
            },
        )
        await actor.stop.remote()
    finally:
        ray.kill(actor)
