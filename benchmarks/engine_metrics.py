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
    """``{TTFT: Histogram, ITL: Histogram, GENERATED: float}`` summed over pools."""
    out: dict[str, Any] = {TTFT: Histogram(), ITL: Histogram(), GENERATED: 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
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
    out: dict[str, Any] = {TTFT: Histogram(), ITL: Histogram(), GENERATED: 0.0}
    for p in parts:
        out[TTFT] = out[TTFT].add(p[TTFT])
        out[ITL] = out[ITL].add(p[ITL])
        out[GENERATED] += p[GENERATED]
    return out


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
