"""The admission seam: a request in, a grant or a wait value out, one waiting loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from pipeline.admission import (
    AdmissionConfig,
    AdmissionGate,
    AdmissionPolicy,
    AdmissionRequest,
    GateUsage,
    Grant,
    LocalGate,
    PriorityClass,
    Reconciliation,
    Wait,
    WaitReason,
    acquire_within,
    counted_usage,
)
from pipeline.errors import ReservationTooLarge
from pipeline.usage import AttemptUsage, Usage
from pipeline.worker.contracts import Unlimited


class Scripted:
    """A gate that answers from a script and records the timeouts it was given."""

    def __init__(self, *answers: Grant | Wait) -> None:
        self.answers = list(answers)
        self.timeouts: list[float | None] = []

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        self.timeouts.append(timeout)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool
    ) -> Reconciliation | None:
        return None

    async def cooldown(self, seconds: float) -> None:
        return None


ASK = AdmissionRequest("t", 100, 50, PriorityClass.BATCH, job_id="j", fence=3)


def grant() -> Grant:
    return Grant("g", "s", "t", PriorityClass.BATCH, 100, 50, 150, 0.0)


def test_a_request_reserves_prompt_plus_output() -> None:
    assert ASK.reserved_tokens == 150


async def test_the_loop_waits_out_each_hint_and_returns_the_grant() -> None:
    gate = Scripted(Wait(0.01, WaitReason.RPM), Wait(0.01, WaitReason.TPM), grant())
    seen: list[tuple[WaitReason, float]] = []
    got = await acquire_within(
        gate, ASK, seconds_left=lambda: 10.0, call_timeout=2.0,
        on_wait=lambda w, pause: seen.append((w.reason, pause)),
    )  # fmt: skip
    assert got == grant()
    assert gate.timeouts == [2.0, 2.0, 2.0]
    assert seen == [(WaitReason.RPM, 0.01), (WaitReason.TPM, 0.01)]


async def test_the_loop_returns_the_last_wait_when_time_runs_out() -> None:
    deadline = time.monotonic() + 0.2
    gate = Scripted(Wait(0.05, WaitReason.IN_FLIGHT))
    got = await acquire_within(gate, ASK, seconds_left=lambda: deadline - time.monotonic())
    assert got == Wait(0.05, WaitReason.IN_FLIGHT)
    assert 2 <= len(gate.timeouts) <= 6
    assert time.monotonic() >= deadline - 0.05


async def test_the_pause_is_bounded_and_the_reserve_is_kept_back() -> None:
    wait = Wait(30.0, WaitReason.COOLDOWN)
    gate = Scripted(wait, wait, grant())
    pauses: list[float] = []
    got = await acquire_within(
        gate, ASK, seconds_left=lambda: 1.5, reserve=1.0, min_pause=0.1, max_pause=0.02,
        on_wait=lambda _, pause: pauses.append(pause),
    )  # fmt: skip
    assert got == grant()
    assert pauses == [0.02, 0.02]  # not the hint's 30 s, nor past the 0.5 s left
    assert gate.timeouts == [1.5, 1.5, 1.5]  # no call_timeout: the time left
    ran_out = Scripted(wait)
    assert await acquire_within(ran_out, ASK, seconds_left=lambda: 1.0, reserve=1.0) == wait
    assert len(ran_out.timeouts) == 1  # asked once, then nothing left past the reserve


async def test_an_interrupt_ends_the_wait_at_once() -> None:
    gate = Scripted(Wait(30.0, WaitReason.FAIR_SHARE))
    lost = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, lost.set)
    started = time.monotonic()
    got = await acquire_within(gate, ASK, seconds_left=lambda: 60.0, interrupt=lost)
    assert got == Wait(30.0, WaitReason.FAIR_SHARE)
    assert time.monotonic() - started < 5
    assert len(gate.timeouts) == 1


async def test_the_local_gate_asks_its_policy_once_and_settles_there() -> None:
    policy = AdmissionPolicy(AdmissionConfig(scope="local", max_in_flight=1, tpm=1000))
    gate: AdmissionGate = LocalGate(policy)
    first = await gate.acquire(ASK, timeout=30)
    assert isinstance(first, Grant) and (first.job_id, first.fence) == ("j", 3)
    assert first.priority is PriorityClass.BATCH
    blocked = await gate.acquire(ASK, timeout=30)
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.IN_FLIGHT
    rec = await gate.release(first, usage=AttemptUsage(80, None, None), uncertain=False)
    assert rec is not None and rec.charged_tokens == 80
    assert await gate.release(first, usage=None, uncertain=False) is None  # settled once
    with pytest.raises(ReservationTooLarge):
        await gate.acquire(AdmissionRequest("t", 900, 200), timeout=0)


async def test_unlimited_grants_everything_at_once() -> None:
    gate: AdmissionGate = Unlimited()
    got = await gate.acquire(ASK, timeout=0)
    assert isinstance(got, Grant) and got.reserved_tokens == 150 and got.tenant == "t"
    assert await gate.release(got, usage=None, uncertain=True) is None


def test_unknown_counts_count_as_zero() -> None:
    assert counted_usage(None) is None
    assert counted_usage(AttemptUsage(10, None, 2)) == Usage(10, 0, 2)
    assert counted_usage(Usage(5, 6, 1)) == Usage(5, 6, 1)
