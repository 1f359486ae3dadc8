"""Bridge a prometheus-client registry into Ray's metrics agent.

Why: on a Ray node Prometheus scrapes one endpoint, the metrics agent
(``metrics-export-port``, 8080 in ``kuberay/``; the PodMonitor's target). It
exports what Ray records and anything recorded with ``ray.util.metrics``, but
not collectors that live in a prometheus-client registry: the engine replica's
``fenceline_engine_*`` (:class:`deployments.engine.EngineMetrics`) and the
maintenance actor's broker path (:mod:`pipeline.messaging.metrics`, on the process
default registry). :class:`RegistryBridge` collects such a registry every few
seconds and records every sample with ``ray.util.metrics``, keeping its name.

Translation, and what Ray 2.60's exporter makes of it (it prefixes ``ray_`` and
adds ``_total`` to counters; it also adds the labels ``WorkerId``,
``NodeAddress``, ``Component``, ``SessionName`` and ``Version``):

* gauge ``X{l}`` → ``Gauge("X").set`` → ``ray_X{l}``;
* counter ``X_total{l}`` → ``Counter("X").inc(increase since last collect)``
  → ``ray_X_total{l}``;
* histogram ``X_bucket{l,le}``, ``X_count{l}``, ``X_sum{l}`` → one ``Gauge``
  each, set to the cumulative value → ``ray_X_bucket{l,le}``,
  ``ray_X_count{l}``, ``ray_X_sum{l}``;
* any other sample ``S{l}`` (summary, info) → ``Gauge("S").set`` → ``ray_S{l}``;
* ``*_created`` samples and non-finite values are dropped.

Histograms become gauges of their cumulative series because a Ray
``Histogram`` only takes single observations, which a registry no longer
holds; with the ``le`` label kept, ``histogram_quantile(0.99, sum by (le, pool)
(rate(ray_fenceline_engine_ttft_seconds_bucket[5m])))`` works on them as on a
native histogram.

Invariants:

* A Ray counter only moves forward, by the increase since the previous collect.
  A prometheus counter that went down (its registry was rebuilt) started from
  zero again, so its whole new value is the increase.
* Only families whose name starts with ``prefix`` (``fenceline_`` by default)
  are bridged: the default registry also holds prometheus-client's own
  ``process_*`` and ``python_*`` collectors (Ray reports its workers' CPU and
  memory itself).
* A collect that raises is logged and retried next round; it never stops the
  loop.

It lives in ``deployments/`` (not ``cluster/``) because the engine deployment
uses it, and ``cluster`` already depends on ``deployments``, never the reverse.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

#: Ray's own export cadence is 10 s (``metrics_report_interval_ms``); collecting
#: twice as often keeps the bridge from adding more than one export of delay.
DEFAULT_INTERVAL_S = 5.0


class Recorder(Protocol):
    """Where translated samples go: Ray's metrics in a worker, a list in tests."""

    def set_gauge(
        self, name: str, description: str, tags: Mapping[str, str], value: float
    ) -> None: ...

    def inc_counter(
        self, name: str, description: str, tags: Mapping[str, str], amount: float
    ) -> None: ...


class RayRecorder:
    """A :class:`Recorder` over ``ray.util.metrics``, one Ray metric per name and tag set.

    Ray metrics are created lazily, on a sample's first sight, with the tag keys
    it carries (Ray requires a value for every declared key on each record).
    """

    def __init__(self) -> None:
        self._gauges: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._counters: dict[tuple[str, tuple[str, ...]], Any] = {}

    def set_gauge(self, name: str, description: str, tags: Mapping[str, str], value: float) -> None:
        from ray.util.metrics import Gauge

        key = (name, tuple(sorted(tags)))
        gauge = self._gauges.get(key)
        if gauge is None:
            gauge = self._gauges[key] = Gauge(name, description=description, tag_keys=key[1])
        gauge.set(value, tags=dict(tags))

    def inc_counter(
        self, name: str, description: str, tags: Mapping[str, str], amount: float
    ) -> None:
        from ray.util.metrics import Counter

        key = (name, tuple(sorted(tags)))
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = Counter(name, description=description, tag_keys=key[1])
        counter.inc(amount, tags=dict(tags))


def _labels_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


class RegistryBridge:
    """Collects ``registry`` every ``interval_s`` and records it through ``recorder``.

    ``run_once`` is the whole translation (tests call it directly);
    ``start``/``stop`` run it as an asyncio task on the caller's event loop.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        recorder: Recorder | None = None,
        *,
        prefix: str = "fenceline_",
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.registry = registry
        self.recorder: Recorder = recorder if recorder is not None else RayRecorder()
        self.prefix = prefix
        self.interval_s = interval_s
        self.rounds = 0
        self._last_counts: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._task: asyncio.Task[None] | None = None
        self._round_done: asyncio.Condition | None = None

    def run_once(self) -> int:
        """Collect once and record every bridged sample; returns how many were recorded."""
        recorded = 0
        for family in self.registry.collect():
            if not family.name.startswith(self.prefix):
                continue
            for sample in family.samples:
                if sample.name.endswith("_created") or not math.isfinite(sample.value):
                    continue
                tags = dict(sample.labels)
                counted = sample.name in (family.name, f"{family.name}_total")
                if family.type == "counter" and counted:
                    if self._count(family.name, family.documentation, tags, sample.value):
                        recorded += 1
                else:
                    self.recorder.set_gauge(sample.name, family.documentation, tags, sample.value)
                    recorded += 1
        self.rounds += 1
        return recorded

    def _count(self, name: str, description: str, tags: dict[str, str], value: float) -> bool:
        key = (name, _labels_key(tags))
        last = self._last_counts.get(key, 0.0)
        self._last_counts[key] = value
        delta = value - last if value >= last else value  # went down: a reset
        if delta <= 0:
            return False
        self.recorder.inc_counter(name, description, tags, delta)
        return True

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start collecting on the running event loop (the first round runs at once)."""
        if self.running:
            return
        self._round_done = asyncio.Condition()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def stop(self) -> None:
        """Stop collecting (idempotent); what was recorded stays with Ray."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def wait_rounds(self, rounds: int) -> None:
        """Wait until ``rounds`` collects have run in total (tests, start-up checks)."""
        if self._round_done is None:
            raise RuntimeError("bridge not started")
        async with self._round_done:
            await self._round_done.wait_for(lambda: self.rounds >= rounds)

    async def _loop(self) -> None:
        while True:
            try:
                self.run_once()
            except Exception:
                log.exception("metrics bridge: collecting %s failed", self.prefix)
                self.rounds += 1
            if self._round_done is not None:
                async with self._round_done:
                    self._round_done.notify_all()
            await asyncio.sleep(self.interval_s)


def bridge_to_ray(
    registry: CollectorRegistry,
    *,
    prefix: str = "fenceline_",
    interval_s: float = DEFAULT_INTERVAL_S,
) -> RegistryBridge | None:
    """Start a :class:`RegistryBridge` into Ray when this process is connected to Ray.

    Returns None outside Ray (tests, the benchmark's in-process engine) and when
    no event loop is running (nothing could run the task); callers keep their
    own ``metrics_text`` either way.
    """
    # A process connected to Ray has imported it; one that has not (the benchmark's
    # in-process admission actor, tests) must not pay the import (~0.4-0.9 s of CPU
    # on a 2-core machine) on its first admission decision just to learn that.
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        log.warning("metrics bridge for %s not started: no running event loop", prefix)
        return None
    bridge = RegistryBridge(registry, RayRecorder(), prefix=prefix, interval_s=interval_s)
    bridge.start()
    return bridge
