"""An open-loop load generator: the arrival schedule is fixed before the first send.

The spec's production-acceptance section asks for open-loop traffic, because a
closed loop (send the next request only after a response) slows down exactly
when the system saturates and so hides backlog growth. Here every arrival time
is computed up front from the scenario's
:class:`~benchmarks.scenario.ArrivalSpec` (:func:`schedule`), and each request is
fired at its time as an independent task (:class:`OpenLoopGenerator`): a slow or
paused target delays responses, never sends. Each send records its scheduled
and actual time, so a report can show that the generator itself kept up
(``lag = actual - scheduled``).

Arrival processes (all deterministic in ``seed``):

* ``poisson``: exponential gaps at ``rate`` per second.
* ``gamma``: gamma-distributed gaps with mean ``1/rate`` and coefficient of
  variation ``cv`` (``cv > 1`` is burstier than Poisson, ``cv = 1`` is Poisson).
* ``ramp``: a non-homogeneous Poisson process whose rate moves linearly from
  ``rate`` to ``rate_end`` over the duration (thinning).
* ``burst``: ``count`` requests all scheduled at t = 0 (a one-shot backlog).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.scenario import ArrivalSpec


def schedule(spec: ArrivalSpec, seed: int) -> list[float]:
    """Arrival offsets in seconds from the start, sorted, all within the duration.

    Deterministic in ``(spec, seed)``; a run and its rerun send the same load.
    """
    rng = random.Random(f"arrivals:{seed}")
    if spec.process == "burst":
        return [0.0] * spec.count
    out: list[float] = []
    t = 0.0
    if spec.process == "poisson":
        while True:
            t += rng.expovariate(spec.rate)
            if t >= spec.duration_s:
                return out
            out.append(t)
    if spec.process == "gamma":
        shape = 1.0 / (spec.cv**2)
        scale = 1.0 / (spec.rate * shape)  # mean gap = shape·scale = 1/rate
        while True:
            t += rng.gammavariate(shape, scale)
            if t >= spec.duration_s:
                return out
            out.append(t)
    # ramp: thinning of a homogeneous process at the peak rate
    assert spec.rate_end is not None
    peak = max(spec.rate, spec.rate_end)
    while True:
        t += rng.expovariate(peak)
        if t >= spec.duration_s:
            return out
        rate_t = spec.rate + (spec.rate_end - spec.rate) * (t / spec.duration_s)
        if rng.random() < rate_t / peak:
            out.append(t)


def expected_count(spec: ArrivalSpec) -> float:
    """The mean number of arrivals the process produces (for sanity checks)."""
    if spec.process == "burst":
        return float(spec.count)
    if spec.process == "ramp":
        assert spec.rate_end is not None
        return (spec.rate + spec.rate_end) / 2 * spec.duration_s
    return spec.rate * spec.duration_s


@dataclass
class Send:
    """One request of the schedule: when it was due, when it left, how it ended."""

    index: int
    scheduled: float
    sent: float | None = None
    done: float | None = None
    outcome: str = "pending"
    status: int | None = None
    detail: Any = None

    @property
    def lag(self) -> float | None:
        return None if self.sent is None else self.sent - self.scheduled

    @property
    def latency(self) -> float | None:
        if self.sent is None or self.done is None:
            return None
        return self.done - self.sent


#: Fires request ``index``; returns (outcome, HTTP status or None, detail).
Fire = Callable[[int], Awaitable[tuple[str, int | None, Any]]]


@dataclass
class OpenLoopGenerator:
    """Fires ``fire(i)`` at ``offsets[i]`` seconds after :meth:`run` starts, open loop.

    Each request is its own task, started at its scheduled time whether or not
    earlier requests answered; ``sent`` is stamped when the task begins, before
    the first await, so a target that never answers cannot delay it. Offsets
    are relative to ``start`` (``time.monotonic()`` when :meth:`run` began).

    Attributes:
        sends: one :class:`Send` per scheduled arrival, in schedule order.
    """

    offsets: list[float]
    fire: Fire
    on_progress: Callable[[OpenLoopGenerator], None] | None = None
    start: float = 0.0
    sends: list[Send] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.sends = [Send(i, t) for i, t in enumerate(self.offsets)]

    @property
    def sent(self) -> int:
        return sum(1 for s in self.sends if s.sent is not None)

    @property
    def finished(self) -> int:
        return sum(1 for s in self.sends if s.done is not None)

    async def _one(self, send: Send) -> None:
        send.sent = time.monotonic() - self.start
        try:
            send.outcome, send.status, send.detail = await self.fire(send.index)
        except Exception as exc:  # a failed request is a result, not a crash
            send.outcome, send.detail = "error", f"{type(exc).__name__}: {exc}"
        send.done = time.monotonic() - self.start

    async def run(self, *, wait: bool = True, timeout: float | None = None) -> list[Send]:
        """Send the whole schedule; with ``wait``, then wait for answers (up to ``timeout``).

        Returns the sends; unanswered ones keep ``done = None`` (outcome ``pending``).
        """
        self.start = time.monotonic()
        for send in self.sends:
            delay = self.start + send.scheduled - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(self._one(send), name=f"loadgen-{send.index}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if self.on_progress is not None and send.index % 50 == 0:
                self.on_progress(self)
        # Let the last tasks start, so every send is stamped before we return.
        await asyncio.sleep(0)
        if wait and self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        return self.sends

    async def cancel(self) -> None:
        """Abandon requests still waiting for an answer."""
        tasks = set(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)


def lag_stats(sends: list[Send]) -> dict[str, float]:
    """How far behind schedule sends left: max and mean lag in seconds."""
    lags = [s.lag for s in sends if s.lag is not None]
    if not lags:
        return {"max_lag_s": math.nan, "mean_lag_s": math.nan}
    return {"max_lag_s": max(lags), "mean_lag_s": sum(lags) / len(lags)}
