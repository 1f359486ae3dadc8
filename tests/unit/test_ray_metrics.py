"""The prometheus-client → ``ray.util.metrics`` bridge, without Ray.

A recorder that keeps every call stands in for Ray's metrics; the registries
are real prometheus-client registries (the engine's and the broker path's own
metric classes among them). The same bridge against a real local Ray and its
metrics endpoint: ``tests/integration/test_ray_metrics.py``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, Summary
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

import deployments.engine as engine_module
import deployments.vllm_engine as vllm_module
from deployments.engine import EngineMetrics, PoolEngine
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.messaging import BrokerMetrics


@dataclass(frozen=True)
class Call:
    kind: str  # "gauge" | "counter"
    name: str
    tags: tuple[tuple[str, str], ...]
    value: float
    description: str


class ListRecorder:
    """Every call the bridge makes, in order."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def set_gauge(self, name: str, description: str, tags: Mapping[str, str], value: float) -> None:
        self.calls.append(Call("gauge", name, tuple(sorted(tags.items())), value, description))

    def inc_counter(
        self, name: str, description: str, tags: Mapping[str, str], amount: float
    ) -> None:
        self.calls.append(Call("counter", name, tuple(sorted(tags.items())), amount, description))

    def take(self) -> list[Call]:
        taken, self.calls = self.calls, []
        return taken

    def one(self, kind: str, name: str, **tags: str) -> float:
        (found,) = [
            c.value
            for c in self.calls
            if (c.kind, c.name, c.tags) == (kind, name, tuple(sorted(tags.items())))
        ]
        return found


def bridge_for(registry: CollectorRegistry, **kwargs: Any) -> tuple[RegistryBridge, ListRecorder]:
    recorder = ListRecorder()
    return RegistryBridge(registry, recorder, **kwargs), recorder


def test_gauges_counters_and_histograms_keep_their_names_and_labels() -> None:
    r = CollectorRegistry()
    Gauge("fenceline_queue_depth", "Queue depth.", ["queue"], registry=r).labels("work").set(7)
    Counter("fenceline_tokens", "Tokens.", ["pool"], registry=r).labels("short").inc(40)
    h = Histogram("fenceline_wait_seconds", "Wait.", ["pool"], buckets=(0.1, 1.0), registry=r)
    h.labels("short").observe(0.05)
    h.labels("short").observe(0.5)
    h.labels("short").observe(3.0)
    bridge, rec = bridge_for(r)

    assert bridge.run_once() == len(rec.calls)
    assert rec.one("gauge", "fenceline_queue_depth", queue="work") == 7
    # Ray's Counter of the family name: exported as ray_fenceline_tokens_total.
    assert rec.one("counter", "fenceline_tokens", pool="short") == 40
    # Histograms: the cumulative series as gauges, `le` kept for histogram_quantile.
    bucket = "fenceline_wait_seconds_bucket"
    assert rec.one("gauge", bucket, pool="short", le="0.1") == 1
    assert rec.one("gauge", bucket, pool="short", le="1.0") == 2
    assert rec.one("gauge", bucket, pool="short", le="+Inf") == 3
    assert rec.one("gauge", "fenceline_wait_seconds_count", pool="short") == 3
    assert rec.one("gauge", "fenceline_wait_seconds_sum", pool="short") == pytest.approx(3.55)
    assert not [c for c in rec.calls if c.name.endswith("_created")]
    assert {c.description for c in rec.calls if c.name.startswith("fenceline_wait")} == {"Wait."}
    assert bridge.rounds == 1


def test_counters_record_the_increase_since_the_last_collect() -> None:
    r = CollectorRegistry()
    tokens = Counter("fenceline_tokens", "Tokens.", ["pool"], registry=r)
    tokens.labels("short").inc(5)
    bridge, rec = bridge_for(r)
    bridge.run_once()
    assert rec.take() == [Call("counter", "fenceline_tokens", (("pool", "short"),), 5, "Tokens.")]

    bridge.run_once()  # nothing new: Ray's counter must not move (inc(0) is an error there)
    assert rec.take() == []

    tokens.labels("short").inc(2)
    tokens.labels("long").inc(1)
    bridge.run_once()
    assert sorted((c.tags, c.value) for c in rec.take()) == [
        ((("pool", "long"),), 1),
        ((("pool", "short"),), 2),
    ]


class _Scripted(Collector):
    """A collector whose counter value the test sets (a registry rebuilt goes down)."""

    def __init__(self) -> None:
        self.value = 0.0
        self.fail = False

    def collect(self) -> Iterator[CounterMetricFamily]:
        if self.fail:
            raise RuntimeError("collector broke")
        family = CounterMetricFamily("fenceline_sent", "Sent.", labels=["via"])
        family.add_metric(["broker"], self.value)
        yield family


def test_a_counter_that_went_down_counts_from_zero_again() -> None:
    r = CollectorRegistry()
    scripted = _Scripted()
    r.register(scripted)
    bridge, rec = bridge_for(r)
    scripted.value = 10
    bridge.run_once()
    scripted.value = 3  # reset: 3 new since it restarted, not -7
    bridge.run_once()
    scripted.value = 4
    bridge.run_once()
    assert [c.value for c in rec.calls] == [10, 3, 1]
    assert {c.name for c in rec.calls} == {"fenceline_sent"}


def test_only_families_with_the_prefix_are_bridged() -> None:
    r = CollectorRegistry()
    Gauge("fenceline_engine_requests_waiting", "w", registry=r).set(1)
    Gauge("fenceline_outbox_unpublished_events", "u", registry=r).set(2)
    Gauge("process_like_gauge", "not ours", registry=r).set(3)
    bridge, rec = bridge_for(r, prefix="fenceline_engine_")
    bridge.run_once()
    assert [c.name for c in rec.calls] == ["fenceline_engine_requests_waiting"]

    everything, rec_all = bridge_for(r, prefix="")
    everything.run_once()
    assert {c.name for c in rec_all.calls} == {
        "fenceline_engine_requests_waiting",
        "fenceline_outbox_unpublished_events",
        "process_like_gauge",
    }


def test_other_sample_types_become_gauges_and_non_finite_values_are_dropped() -> None:
    r = CollectorRegistry()
    Summary("fenceline_batch_seconds", "Batch.", registry=r).observe(2.0)
    Info("fenceline_build", "Build.", registry=r).info({"version": "0.1.0"})
    nan = GaugeMetricFamily("fenceline_unknown", "NaN gauge.")
    nan.add_metric([], math.nan)

    class _Nan(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            yield nan

    r.register(_Nan())
    bridge, rec = bridge_for(r)
    bridge.run_once()
    assert rec.one("gauge", "fenceline_batch_seconds_count") == 1
    assert rec.one("gauge", "fenceline_batch_seconds_sum") == 2.0
    assert rec.one("gauge", "fenceline_build_info", version="0.1.0") == 1
    assert not [c for c in rec.calls if c.name == "fenceline_unknown"]


def test_the_engine_metrics_translate_as_documented() -> None:
    metrics = EngineMetrics("short")
    metrics.ttft.observe(0.3)
    metrics.prompt_tokens.inc(120)
    metrics.waiting.set(2)
    metrics.outcome("ok")
    bridge, rec = bridge_for(metrics.registry, prefix="fenceline_engine_")
    bridge.run_once()
    assert rec.one("gauge", "fenceline_engine_ttft_seconds_bucket", pool="short", le="0.5") == 1
    assert rec.one("gauge", "fenceline_engine_ttft_seconds_bucket", pool="short", le="0.25") == 0
    assert rec.one("gauge", "fenceline_engine_ttft_seconds_count", pool="short") == 1
    assert rec.one("counter", "fenceline_engine_prompt_tokens", pool="short") == 120
    assert rec.one("counter", "fenceline_engine_requests", pool="short", outcome="ok") == 1
    assert rec.one("gauge", "fenceline_engine_requests_waiting", pool="short") == 2
    assert rec.one("gauge", "fenceline_engine_kv_cache_usage_ratio", pool="short") == 0


def test_the_broker_path_metrics_translate() -> None:
    broker = BrokerMetrics(CollectorRegistry())
    broker.outbox_published.labels("broker").inc(3)
    broker.outbox_unpublished.set(4)
    broker.broker_lag_seconds.observe(0.02)
    bridge, rec = bridge_for(broker.registry)
    bridge.run_once()
    assert rec.one("counter", "fenceline_outbox_published", via="broker") == 3
    assert rec.one("gauge", "fenceline_outbox_unpublished_events") == 4
    assert rec.one("gauge", "fenceline_broker_lag_seconds_bucket", le="0.025") == 1
    assert rec.one("gauge", "fenceline_broker_lag_seconds_bucket", le="0.01") == 0


async def test_start_collects_at_once_and_keeps_going_through_a_failing_collect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = CollectorRegistry()
    scripted = _Scripted()
    r.register(scripted)
    bridge, rec = bridge_for(r, interval_s=0.01)
    scripted.value = 1
    bridge.start()
    assert bridge.running
    await asyncio.wait_for(bridge.wait_rounds(1), 5)
    assert rec.calls[0].value == 1
    scripted.fail = True
    with caplog.at_level(logging.ERROR, logger="deployments.ray_metrics"):
        seen = bridge.rounds
        await asyncio.wait_for(bridge.wait_rounds(seen + 2), 5)
    assert "collecting fenceline_ failed" in caplog.text
    scripted.fail, scripted.value = False, 5
    await asyncio.wait_for(bridge.wait_rounds(bridge.rounds + 1), 5)
    assert bridge.running
    assert [c.value for c in rec.calls] == [1, 4]
    bridge.stop()
    await asyncio.sleep(0)  # let the cancellation land
    assert not bridge.running
    bridge.stop()  # idempotent


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        RegistryBridge(CollectorRegistry(), ListRecorder(), interval_s=0)


async def test_no_bridge_outside_ray() -> None:
    import ray

    assert not ray.is_initialized()
    assert bridge_to_ray(CollectorRegistry()) is None


class _StubEngine:
    def __init__(self) -> None:
        self.shut_down = False
        # AsyncLLM's: PoolEngine sends trace headers only when vLLM exports spans.
        self.observability_config = SimpleNamespace(otlp_traces_endpoint=None)

    def shutdown(self) -> None:
        self.shut_down = True


async def test_a_pool_engine_bridges_its_registry_and_stops_the_bridge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PoolEngine hands its own registry to the bridge (engine prefix) and stops it."""
    stub = _StubEngine()
    started: list[RegistryBridge] = []

    def fake_bridge(registry: CollectorRegistry, *, prefix: str = "fenceline_") -> RegistryBridge:
        bridge = RegistryBridge(registry, ListRecorder(), prefix=prefix, interval_s=3600)
        bridge.start()
        started.append(bridge)
        return bridge

    monkeypatch.setattr(vllm_module, "build_engine", lambda *_: stub)
    monkeypatch.setattr(engine_module, "bridge_to_ray", fake_bridge)
    engine = PoolEngine({"name": "short", "max_model_len": 64})
    (bridge,) = started
    assert bridge.registry is engine.metrics.registry
    assert bridge.prefix == "fenceline_engine_"
    assert bridge.running
    engine.stop()
    await asyncio.sleep(0)
    assert not bridge.running and stub.shut_down
