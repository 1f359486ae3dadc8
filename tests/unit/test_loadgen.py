"""The load generator is open loop, and its schedules are deterministic and shaped right."""

from __future__ import annotations

import asyncio
import gc
import itertools
import statistics
from typing import Any

import httpx
import pytest

from benchmarks.load.generator import OpenLoopGenerator, expected_count, lag_stats, schedule
from benchmarks.scenario import ArrivalSpec


class PausedTarget:
    """A real HTTP server on loopback that reads every request and never answers."""

    def __init__(self) -> None:
        self.received = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                if line.startswith(b"POST "):
                    self.received += 1
        except (ConnectionError, asyncio.CancelledError):
            return

    async def __aenter__(self) -> PausedTarget:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        for w in self._writers:
            w.close()
        self._server.close()
        await self._server.wait_closed()


async def test_paused_target_does_not_slow_the_schedule() -> None:
    spec = ArrivalSpec(process="poisson", rate=40, duration_s=2.0)
    offsets = schedule(spec, seed=3)
    assert 50 <= len(offsets) <= 110  # 80 expected
    async with PausedTarget() as target:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:

            async def fire(i: int) -> tuple[str, int | None, Any]:
                r = await client.post(f"http://127.0.0.1:{target.port}/v1/x", json={"i": i})
                return "answered", r.status_code, None

            gen = OpenLoopGenerator(offsets, fire)
            loop = asyncio.get_running_loop()
            # The lag measured is the generator's, not the collector's: late in the
            # whole suite the process heap is large and one full collection can
            # stall the loop for most of a second.
            gc.collect()
            gc.disable()
            try:
                t0 = loop.time()
                await gen.run(wait=False)
                elapsed = loop.time() - t0
            finally:
                gc.enable()
            # Every request left, although none was answered.
            assert gen.sent == len(offsets)
            assert gen.finished == 0
            # Sending took about the schedule's span, not longer (nothing waited on answers).
            assert elapsed < offsets[-1] + 1.0
            stats = lag_stats(gen.sends)
            assert stats["max_lag_s"] < 0.75, stats
            # Sends kept pace through the run: the second half is no later than the first.
            half = len(gen.sends) // 2
            first = statistics.mean(s.lag or 0 for s in gen.sends[:half])
            second = statistics.mean(s.lag or 0 for s in gen.sends[half:])
            assert second < first + 0.25
            # The target actually received the requests at the scheduled rate.
            for _ in range(100):
                if target.received >= len(offsets):
                    break
                await asyncio.sleep(0.05)
            assert target.received >= 0.9 * len(offsets)
            assert all(s.done is None for s in gen.sends)
            await gen.cancel()
            assert all(s.outcome in ("pending", "error") for s in gen.sends)


def test_schedules_are_deterministic_in_the_seed() -> None:
    spec = ArrivalSpec(process="poisson", rate=10, duration_s=30)
    assert schedule(spec, 1) == schedule(spec, 1)
    assert schedule(spec, 1) != schedule(spec, 2)


@pytest.mark.parametrize(
    "spec",
    [
        ArrivalSpec(process="poisson", rate=20, duration_s=200),
        ArrivalSpec(process="gamma", rate=20, cv=3.0, duration_s=200),
        ArrivalSpec(process="ramp", rate=5, rate_end=35, duration_s=200),
    ],
)
def test_counts_match_the_process_mean(spec: ArrivalSpec) -> None:
    offsets = schedule(spec, 7)
    assert offsets == sorted(offsets)
    assert all(0 <= t < spec.duration_s for t in offsets)
    assert abs(len(offsets) - expected_count(spec)) < 0.1 * expected_count(spec)


def test_gamma_burstiness_shows_in_gap_spread() -> None:
    def cv(spec: ArrivalSpec) -> float:
        offs = schedule(spec, 11)
        gaps = [b - a for a, b in itertools.pairwise(offs)]
        return statistics.pstdev(gaps) / statistics.mean(gaps)

    poisson = cv(ArrivalSpec(process="poisson", rate=20, duration_s=300))
    bursty = cv(ArrivalSpec(process="gamma", rate=20, cv=3.0, duration_s=300))
    assert 0.85 < poisson < 1.15
    assert bursty > 2.2


def test_ramp_rises_and_burst_is_all_at_zero() -> None:
    offs = schedule(ArrivalSpec(process="ramp", rate=2, rate_end=40, duration_s=100), 5)
    early = sum(1 for t in offs if t < 25)
    late = sum(1 for t in offs if t >= 75)
    assert late > 3 * early
    burst = schedule(ArrivalSpec(process="burst", count=500), 5)
    assert burst == [0.0] * 500


def test_invalid_specs_are_rejected() -> None:
    with pytest.raises(ValueError, match="count"):
        ArrivalSpec(process="burst")
    with pytest.raises(ValueError, match="rate_end"):
        ArrivalSpec(process="ramp", rate=1)
