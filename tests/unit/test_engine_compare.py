"""The Serve-vs-direct benchmark's report: caller-side TTFT and the ratios built on it.

The Serve side's TTFT is timed in the engine replica; the benchmark adds the
time the caller waited outside the engine (caller E2EL − replica E2EL) so the
headline TTFT ratio includes the router and handle hops. No engine runs here:
the completions are built with known timings.
"""

from __future__ import annotations

import pytest

from benchmarks.engines.compare import SideResult, ratios
from pipeline.extraction import Completion, Timings
from pipeline.usage import Usage


def completion(*, ttft: float | None, replica_e2e: float) -> Completion:
    return Completion(
        text="{}",
        usage=Usage(prompt_tokens=100, completion_tokens=10),
        timings=Timings(e2e_s=replica_e2e, ttft_s=ttft, itl_s=(0.01,) * 9),
        engine="test",
        model="m",
        pool="short",
    )


def side(name: str, rows: list[tuple[float | None, float, float]]) -> SideResult:
    """``rows``: (replica TTFT, replica E2EL, caller E2EL) per request."""
    return SideResult(
        name=name,
        wall_s=1.0,
        completions=[completion(ttft=t, replica_e2e=e) for t, e, _ in rows],
        errors=[],
        caller_e2e_s=[c for _, _, c in rows],
    )


def test_caller_ttft_adds_what_the_caller_waited_outside_the_engine() -> None:
    summary = side("serve", [(0.20, 1.00, 1.05), (0.30, 1.20, 1.23), (None, 0.5, 0.6)]).summary()
    assert summary["ttft_ms"]["p50"] == pytest.approx(200, abs=1e-6)
    # 0.20 + 0.05 and 0.30 + 0.03; the request without a first token has no TTFT.
    assert sorted([summary["ttft_caller_ms"]["p50"], summary["ttft_caller_ms"]["p99"]]) == [
        pytest.approx(250, abs=1e-6),
        pytest.approx(330, abs=1e-6),
    ]
    assert summary["ttft_caller_ms"]["mean"] == pytest.approx(290, abs=1e-6)
    assert summary["outside_engine_ms"]["mean"] == pytest.approx(60, abs=1e-6)


def test_the_headline_ttft_ratio_is_caller_side_and_the_replica_ratio_is_kept() -> None:
    direct = side("direct", [(0.20, 1.00, 1.00)] * 3).summary()
    serve = side("serve", [(0.20, 1.00, 1.10)] * 3).summary()
    r = ratios(direct, serve)
    assert r["ttft_replica_p50"] == pytest.approx(1.0)
    assert r["ttft_p50"] == pytest.approx(0.30 / 0.20)
    assert r["ttft_p99"] == pytest.approx(0.30 / 0.20)
    assert r["e2el_p50"] == pytest.approx(1.10)
