"""Per-replica ``fenceline_engine_*`` metrics fed by vLLM's stat-logger hook.

:class:`EngineMetrics` holds one replica's collectors in its own registry;
:func:`stat_logger_factory` is the vLLM ``StatLoggerFactory`` that records the
scheduler and iteration stats into it. :mod:`deployments.engine` wires both into
each pool engine (and re-exports them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from deployments.engine_autoscaling import EngineLoad

if TYPE_CHECKING:
    from vllm.v1.metrics.stats import IterationStats, SchedulerStats

log = logging.getLogger("deployments.engine")

_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80)
_ITL_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 1, 2.5)
_E2E_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300)


class EngineMetrics:
    """``fenceline_engine_*`` collectors for one replica, in their own registry.

    A registry per replica (not the process default) keeps two engines in one
    process (the benchmark, tests) from clashing on metric registration.
    """

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.registry = CollectorRegistry()
        r = self.registry
        labels = ["pool"]
        self.ttft = Histogram(
            "fenceline_engine_ttft_seconds",
            "Time to first token, measured by the engine core.",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=r,
        ).labels(pool)
        self.itl = Histogram(
            "fenceline_engine_itl_seconds",
            "Inter-token latency, measured by the engine core.",
            labels,
            buckets=_ITL_BUCKETS,
            registry=r,
        ).labels(pool)
        self.e2e = Histogram(
            "fenceline_engine_request_seconds",
            "End-to-end request latency seen by the replica.",
            labels,
            buckets=_E2E_BUCKETS,
            registry=r,
        ).labels(pool)
        self.prompt_tokens = Counter(
            "fenceline_engine_prompt_tokens", "Prompt tokens prefilled.", labels, registry=r
        ).labels(pool)
        self.generation_tokens = Counter(
            "fenceline_engine_generation_tokens", "Tokens generated.", labels, registry=r
        ).labels(pool)
        self.requests = Counter(
            "fenceline_engine_requests",
            "Requests by outcome (ok, timeout, cancelled, malformed, error).",
            ["pool", "outcome"],
            registry=r,
        )
        self.preemptions = Counter(
            "fenceline_engine_preemptions",
            "Sequences preempted (KV cache exhausted) and later recomputed.",
            labels,
            registry=r,
        ).labels(pool)
        self.waiting = Gauge(
            "fenceline_engine_requests_waiting",
            "Requests waiting in the scheduler.",
            labels,
            registry=r,
        ).labels(pool)
        self.running = Gauge(
            "fenceline_engine_requests_running",
            "Requests in the running batch.",
            labels,
            registry=r,
        ).labels(pool)
        self.kv_cache_usage = Gauge(
            "fenceline_engine_kv_cache_usage_ratio",
            "Fraction of KV-cache blocks in use (0-1).",
            labels,
            registry=r,
        ).labels(pool)
        #: The last scheduler state (what autoscaling reads; the gauges export it).
        self.load = EngineLoad()
        self.prefix_cache_queries = Counter(
            "fenceline_engine_prefix_cache_queries",
            "Prompt tokens looked up in the prefix cache.",
            labels,
            registry=r,
        ).labels(pool)
        self.prefix_cache_hits = Counter(
            "fenceline_engine_prefix_cache_hits",
            "Prompt tokens found in the prefix cache.",
            labels,
            registry=r,
        ).labels(pool)

    def set_load(self, load: EngineLoad) -> None:
        """The scheduler's latest queue and KV state: the gauges and :attr:`load`."""
        self.load = load
        self.waiting.set(load.waiting)
        self.running.set(load.running)
        self.kv_cache_usage.set(load.kv_usage)

    def record(self, scheduler: SchedulerStats | None, iteration: IterationStats | None) -> None:
        if scheduler is not None:
            self.set_load(
                EngineLoad(
                    waiting=scheduler.num_waiting_reqs,
                    running=scheduler.num_running_reqs,
                    kv_usage=scheduler.kv_cache_usage,
                )
            )
            prefix = scheduler.prefix_cache_stats
            if prefix is not None:
                self.prefix_cache_queries.inc(prefix.queries)
                self.prefix_cache_hits.inc(prefix.hits)
        if iteration is not None:
            self.prompt_tokens.inc(iteration.num_prompt_tokens)
            self.generation_tokens.inc(iteration.num_generation_tokens)
            self.preemptions.inc(iteration.num_preempted_reqs)
            for ttft in iteration.time_to_first_tokens_iter:
                self.ttft.observe(ttft)
            for itl in iteration.inter_token_latencies_iter:
                self.itl.observe(itl)

    def outcome(self, outcome: str) -> None:
        self.requests.labels(self.pool, outcome).inc()

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def stat_logger_factory(metrics: EngineMetrics) -> Any:
    """A vLLM ``StatLoggerFactory`` feeding ``metrics`` (vLLM's hook for custom loggers)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _FencelineStatLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:  # noqa: ARG002
            self.engine_index = engine_index

        def record(
            self,
            scheduler_stats: SchedulerStats | None,
            iteration_stats: IterationStats | None,
            mm_cache_stats: Any = None,  # noqa: ARG002
            engine_idx: int = 0,  # noqa: ARG002
        ) -> None:
            metrics.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            log.info("pool %s: engine %d initialised", metrics.pool, self.engine_index)

    return _FencelineStatLogger
