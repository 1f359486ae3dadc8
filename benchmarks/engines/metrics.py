"""Engine-core latency histograms of the vLLM replicas, before and after a run side.

A call that ends in :class:`~pipeline.errors.MalformedOutput` (output cut at the
cap, the usual end of a small CPU model's answer) carries no timings back to
the caller, yet the engine core timed its first token and every token after.
Each replica exports those as ``fenceline_engine_ttft_seconds`` and
``fenceline_engine_itl_seconds`` histograms (:class:`deployments.engine.EngineMetrics`);
the difference of two snapshots is what one side of a run did. Quantiles are
estimated from the buckets as Prometheus' ``histogram_quantile`` does (linear
within a bucket), so they are only as fine as the bucket bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

TTFT = "fenceline_engine_ttft_seconds"
ITL = "fenceline_engine_itl_seconds"
GENERATED = "fenceline_engine_generation_tokens"
KV_USAGE = "fenceline_engine_kv_cache_usage_ratio"
PREEMPTIONS = "fenceline_engine_preemptions"
#: Per pool: ``{pool: {"kv_cache_usage": ratio now, "preemptions": total}}``.
POOLS = "pools"


@dataclass
class Histogram:
    """Cumulative bucket counts by upper bound, with sum and count."""

    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    count: float = 0.0

    def minus(self, other: Histogram) -> Histogram:
        return Histogram(
            {le: n - other.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.total - other.total,
            self.count - other.count,
        )

    def add(self, other: Histogram) -> Histogram:
        keys = set(self.buckets) | set(other.buckets)
        return Histogram(
            {k: self.buckets.get(k, 0.0) + other.buckets.get(k, 0.0) for k in keys},
            self.total + other.total,
            self.count + other.count,
        )

    def mean(self) -> float:
        return self.total / self.count if self.count > 0 else math.nan

    def quantile(self, q: float) -> float:
        """``histogram_quantile``: linear within the bucket holding rank ``q * count``."""
        if self.count <= 0:
            return math.nan
        rank = q * self.count
        lower, below = 0.0, 0.0
        finite = sorted(le for le in self.buckets if not math.isinf(le))
        for le in finite:
            cum = self.buckets[le]
            if cum >= rank:
                inside = cum - below
                return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
            lower, below = le, cum
        return finite[-1] if finite else math.nan


def parse(text: str) -> dict[str, Any]:
    """``{TTFT: Histogram, ITL: Histogram, GENERATED: float}`` summed over pools, and
    ``POOLS``: each pool's KV-cache usage (a gauge) and preemptions (a counter)."""
    out: dict[str, Any] = {TTFT: Histogram(), ITL: Histogram(), GENERATED: 0.0, POOLS: {}}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            pool = s.labels.get("pool")
            if pool is not None and s.name in (KV_USAGE, f"{PREEMPTIONS}_total"):
                key = "kv_cache_usage" if s.name == KV_USAGE else "preemptions"
                out[POOLS].setdefault(pool, {})[key] = s.value
            if s.name == f"{GENERATED}_total":
                out[GENERATED] += s.value
            for name in (TTFT, ITL):
                h: Histogram = out[name]
                if s.name == f"{name}_bucket":
                    le = float(s.labels["le"])
                    h.buckets[le] = h.buckets.get(le, 0.0) + s.value
                elif s.name == f"{name}_sum":
                    h.total += s.value
                elif s.name == f"{name}_count":
                    h.count += s.value
    return out


def combine(texts: list[str]) -> dict[str, Any]:
    """One snapshot from every replica's metrics text."""
    parts = [parse(t) for t in texts]
    out: dict[str, Any] = {TTFT: Histogram(), ITL: Histogram(), GENERATED: 0.0, POOLS: {}}
    for p in parts:
        out[TTFT] = out[TTFT].add(p[TTFT])
        out[ITL] = out[ITL].add(p[ITL])
        out[GENERATED] += p[GENERATED]
        out[POOLS].update(p[POOLS])
    return out


#: What a run reports per pool when the engine exposes no metrics (the fake provider):
#: absent, not zero, so nobody reads "no preemptions" into a run that could not see them.
ABSENT = {
    "kv_cache_usage_peak": None,
    "preemptions": None,
    "source": "absent: the fake provider exposes no KV-cache or preemption metrics",
}


def pool_summary(
    before: dict[str, Any], after: dict[str, Any], peaks: dict[str, float]
) -> dict[str, Any]:
    """Per pool: preemptions during the run, KV-cache usage at its end and its sampled peak."""
    pools = sorted(set(before.get(POOLS, {})) | set(after.get(POOLS, {})))
    out: dict[str, Any] = {}
    for pool in pools:
        b = before.get(POOLS, {}).get(pool, {})
        a = after.get(POOLS, {}).get(pool, {})
        out[pool] = {
            "preemptions": a.get("preemptions", 0.0) - b.get("preemptions", 0.0),
            "kv_cache_usage_end": a.get("kv_cache_usage"),
            "kv_cache_usage_peak": max(peaks.get(pool, 0.0), a.get("kv_cache_usage") or 0.0),
            "source": "vLLM scheduler stats (fenceline_engine_* of each pool's replica)",
        }
    return out


def note_peaks(snapshot: dict[str, Any], peaks: dict[str, float]) -> None:
    """Keep each pool's highest KV-cache usage seen so far in ``peaks``."""
    for pool, values in snapshot.get(POOLS, {}).items():
        usage = values.get("kv_cache_usage")
        if usage is not None:
            peaks[pool] = max(peaks.get(pool, 0.0), usage)


def side_summary(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """TTFT and ITL of what ran between two snapshots, in ms with vLLM's names.

    TPOT here is the token-weighted mean ITL (every generated token after a
    request's first, all requests alike, truncated ones included).
    """
    ttft = after[TTFT].minus(before[TTFT])
    itl = after[ITL].minus(before[ITL])
    return {
        "source": "engine-core histograms (every request, truncated ones included)",
        "requests_timed": ttft.count,
        "generated_tokens": after[GENERATED] - before[GENERATED],
        "mean_ttft_ms": ttft.mean() * 1000,
        "median_ttft_ms": ttft.quantile(0.5) * 1000,
        "p99_ttft_ms": ttft.quantile(0.99) * 1000,
        "mean_tpot_ms": itl.mean() * 1000,
        "mean_itl_ms": itl.mean() * 1000,
        "median_itl_ms": itl.quantile(0.5) * 1000,
        "p99_itl_ms": itl.quantile(0.99) * 1000,
    }
