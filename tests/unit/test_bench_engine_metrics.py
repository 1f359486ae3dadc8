"""Engine-core histogram snapshots: differences and bucket quantiles."""

from __future__ import annotations

import math

import pytest

from benchmarks.engines.metrics import ITL, TTFT, Histogram, combine, side_summary


def _text(ttft: list[float], itl: list[float], generated: float) -> str:
    """Prometheus text as deployments.engine.EngineMetrics writes it."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest
    from prometheus_client import Histogram as PHistogram

    r = CollectorRegistry()
    t = PHistogram(TTFT, "t", ["pool"], buckets=(0.1, 0.25, 0.5, 1), registry=r).labels("short")
    i = PHistogram(ITL, "i", ["pool"], buckets=(0.01, 0.02, 0.04), registry=r).labels("short")
    g = Counter("fenceline_engine_generation_tokens", "g", ["pool"], registry=r).labels("short")
    for v in ttft:
        t.observe(v)
    for v in itl:
        i.observe(v)
    g.inc(generated)
    return generate_latest(r).decode()


def test_side_summary_is_the_difference_of_two_snapshots() -> None:
    before = combine([_text([0.05], [0.015] * 10, 11)])
    after = combine([_text([0.05, 0.2, 0.3], [0.015] * 10 + [0.03] * 4, 11 + 6)])
    got = side_summary(before, after)
    assert got["requests_timed"] == 2
    assert got["generated_tokens"] == 6
    assert got["mean_ttft_ms"] == pytest.approx(250.0)
    assert got["mean_itl_ms"] == pytest.approx(30.0)
    # Both new TTFTs fall in (0.1, 0.25] and (0.25, 0.5]: the median is the first bucket's top.
    assert got["median_ttft_ms"] == pytest.approx(250.0)


def test_two_replicas_add_up() -> None:
    both = combine([_text([0.2], [], 1), _text([0.4], [], 2)])
    assert both[TTFT].count == 2
    assert both[TTFT].mean() == pytest.approx(0.3)


def test_bucket_quantile_interpolates_and_is_nan_when_empty() -> None:
    h = Histogram({0.1: 0.0, 0.2: 10.0, math.inf: 10.0}, total=1.5, count=10)
    assert h.quantile(0.5) == pytest.approx(0.15)
    assert math.isnan(Histogram().quantile(0.5))
    assert math.isnan(Histogram().mean())


def _replica_text(pool: str, kv: float, preempted: int) -> str:
    """What one replica's deployments.engine_metrics.EngineMetrics exports."""
    from deployments.engine_metrics import EngineMetrics

    m = EngineMetrics(pool)
    m.kv_cache_usage.set(kv)
    m.preemptions.inc(preempted)
    return m.text()


def test_kv_cache_usage_and_preemptions_are_reported_per_pool() -> None:
    from benchmarks.engines.metrics import note_peaks, pool_summary

    before = combine([_replica_text("short", 0.1, 2), _replica_text("long", 0.0, 0)])
    peaks: dict[str, float] = {}
    note_peaks(combine([_replica_text("short", 0.93, 5), _replica_text("long", 0.4, 1)]), peaks)
    after = combine([_replica_text("short", 0.2, 7), _replica_text("long", 0.05, 1)])
    pools = pool_summary(before, after, peaks)
    assert set(pools) == {"short", "long"}
    assert pools["short"]["preemptions"] == 5 and pools["long"]["preemptions"] == 1
    assert pools["short"]["kv_cache_usage_peak"] == pytest.approx(0.93)
    assert pools["long"]["kv_cache_usage_end"] == pytest.approx(0.05)


def test_the_fake_provider_reports_them_absent_not_zero() -> None:
    from benchmarks.engines.metrics import ABSENT

    assert ABSENT["preemptions"] is None and ABSENT["kv_cache_usage_peak"] is None
    assert "absent" in str(ABSENT["source"])
