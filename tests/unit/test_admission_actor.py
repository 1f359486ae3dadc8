"""AdmissionActor as a plain class on one event loop (no Ray): concurrent acquirers
never exceed the permits, are served in fair order, time out with a reason, and
leak nothing when they give up. The client runs over an in-process handle."""

from __future__ import annotations

import asyncio
import time

import pytest

from cluster.admission import AdmissionActor, AdmissionClient, LocalActorHandle
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant, Wait, WaitReason
from pipeline.errors import ReservationTooLarge
from pipeline.usage import Usage


def actor(**limits: object) -> AdmissionActor:
    return AdmissionActor(AdmissionConfig(scope="unit", **limits))  # type: ignore[arg-type]


async def test_concurrent_acquirers_never_exceed_permits() -> None:
    a = actor(max_in_flight=3, tenant_max_in_flight=2, rpm=10_000)
    in_flight: dict[str, int] = {"all": 0, "t0": 0, "t1": 0, "t2": 0}
    peaks = dict.fromkeys(in_flight, 0)

    async def caller(n: int) -> None:
        tenant = f"t{n % 3}"
        for _ in range(5):
            g = await a.acquire(AdmissionRequest(tenant, 100, 50), timeout=10)
            assert isinstance(g, Grant)
            for key in ("all", tenant):
                in_flight[key] += 1
                peaks[key] = max(peaks[key], in_flight[key])
            await asyncio.sleep(0.001 * (n % 4))
            for key in ("all", tenant):
                in_flight[key] -= 1
            await a.release(g, Usage(80, 40))

    await asyncio.gather(*(caller(n) for n in range(24)))
    assert peaks["all"] == 3
    assert max(peaks[t] for t in ("t0", "t1", "t2")) == 2
    snap = await a.snapshot()
    assert (snap["in_flight"], snap["granted_total"], snap["waiters"]) == (0, 120, 0)
    assert snap["window_tokens"] == 120 * 120
    await a.stop()


async def test_b_is_served_before_a_hundredth_grant_of_a() -> None:
    a = actor(max_in_flight=2)
    order: list[str] = []
    gate = asyncio.Event()

    async def job(tenant: str) -> None:
        g = await a.acquire(AdmissionRequest(tenant, 600, 400))
        assert isinstance(g, Grant)
        order.append(tenant)
        await gate.wait()
        await a.release(g, Usage(500, 300))

    backlog = [asyncio.create_task(job("A")) for _ in range(1000)]
    while (await a.snapshot())["waiters"] < 998:  # A's 1,000 acquires arrive first
        await asyncio.sleep(0)
    b = asyncio.create_task(job("B"))
    while (await a.snapshot())["waiters"] < 999:
        await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(b, *backlog)
    assert len(order) == 1001
    assert order.index("B") < 100
    assert order.index("B") <= 2 + 4096 // 1000 + 1
    await a.stop()


async def test_timeout_returns_the_blocking_reason_and_leaks_nothing() -> None:
    a = actor(max_in_flight=1, rpm=1)
    g = await a.acquire(AdmissionRequest("t", 10, 10))
    assert isinstance(g, Grant)
    wait = await a.acquire(AdmissionRequest("t", 10, 10), timeout=0)
    assert wait == Wait(1.0, WaitReason.IN_FLIGHT)
    started = time.monotonic()
    wait = await a.acquire(AdmissionRequest("u", 10, 10), timeout=0.05)
    assert isinstance(wait, Wait) and wait.reason is WaitReason.IN_FLIGHT
    assert time.monotonic() - started >= 0.05
    # A cancelled acquirer leaves no ticket and no permit behind.
    pending = asyncio.create_task(a.acquire(AdmissionRequest("v", 10, 10)))
    await asyncio.sleep(0.01)
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert (await a.snapshot())["queued"] == {}
    await a.release(g, None, attempted=False)  # never called: the request slot comes back
    g2 = await a.acquire(AdmissionRequest("t", 10, 10), timeout=0)
    assert isinstance(g2, Grant)
    await a.release(g2, Usage(5, 5))
    wait = await a.acquire(AdmissionRequest("t", 10, 10), timeout=0)
    assert isinstance(wait, Wait) and wait.reason is WaitReason.RPM
    assert 59.0 < wait.seconds <= 60.0
    assert await a.release(g2) is None  # a second release is refused, not double-counted
    with pytest.raises(ReservationTooLarge):
        await actor(tpm=100).acquire(AdmissionRequest("t", 90, 11))
    await a.stop()


async def test_cooldown_holds_every_waiter_until_it_ends() -> None:
    a = actor(max_in_flight=10, cooldown_min_seconds=0.0)
    assert await a.cooldown(0.3) == pytest.approx(0.3, abs=0.01)
    started = time.monotonic()
    grants = await asyncio.gather(
        *(a.acquire(AdmissionRequest(t, 10, 10), timeout=5) for t in "abcd")
    )
    elapsed = time.monotonic() - started
    assert all(isinstance(g, Grant) for g in grants)
    assert elapsed >= 0.29
    assert min(g.waited_seconds for g in grants if isinstance(g, Grant)) >= 0.29
    await a.stop()


async def test_expired_grant_frees_its_permit_for_waiters() -> None:
    a = actor(max_in_flight=1, grant_ttl_seconds=0.2)
    crashed = await a.acquire(AdmissionRequest("t", 10, 10))
    assert isinstance(crashed, Grant)
    g = await a.acquire(
        AdmissionRequest("u", 10, 10), timeout=5
    )  # the pump expires the holder, then grants
    assert isinstance(g, Grant)
    snap = await a.snapshot()
    assert (snap["expired_total"], snap["in_flight"]) == (1, 1)
    assert await a.run_once() == 0  # nothing left to hand out
    assert await a.release(crashed, Usage(1, 1)) is None  # late release: stays charged
    assert (await a.snapshot())["window_tokens"] == 40
    await a.stop()


async def test_stop_answers_waiters_with_limiter_unreachable() -> None:
    a = actor(max_in_flight=1)
    await a.acquire(AdmissionRequest("t", 1, 1))
    waiter = asyncio.create_task(a.acquire(AdmissionRequest("u", 1, 1)))
    await asyncio.sleep(0.01)
    await a.stop()
    assert await waiter == Wait(1.0, WaitReason.LIMITER_UNREACHABLE)


async def test_client_over_local_handle_passes_through() -> None:
    a = actor(max_in_flight=1)
    client = AdmissionClient(LocalActorHandle(a), scope="unit")
    g = await client.acquire(AdmissionRequest("t", 10, 10), timeout=0)
    assert isinstance(g, Grant) and not g.emergency
    blocked = await client.acquire(AdmissionRequest("t", 10, 10), timeout=0)
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.IN_FLIGHT
    rec = await client.release(g, Usage(3, 4))
    assert rec is not None and rec.charged_tokens == 7
    assert await client.cooldown(0.5) == pytest.approx(0.5, abs=0.01)
    assert (await client.snapshot())["cooldowns_total"] == 1
    with pytest.raises(ReservationTooLarge):  # the actor's own error is not "unreachable"
        await AdmissionClient(LocalActorHandle(actor(tpm=10)), scope="u").acquire(
            AdmissionRequest("t", 9, 2)
        )
    assert not client.unreachable
    await a.stop()


async def test_run_once_serves_waiters_when_the_window_slides() -> None:
    now = [1000.0]
    a = AdmissionActor(AdmissionConfig(scope="unit", rpm=1), clock=lambda: now[0])
    first = await a.acquire(AdmissionRequest("t", 1, 1))
    assert isinstance(first, Grant)
    # Settled at once: its slot then stays in the window 60 s after the release
    # (an open grant would stay until released).
    await a.release(first, None)
    waiter = asyncio.create_task(a.acquire(AdmissionRequest("u", 1, 1), timeout=30))
    while (await a.snapshot())["waiters"] < 1:
        await asyncio.sleep(0)
    assert await a.run_once() == 0
    now[0] += 59.9
    assert await a.run_once() == 0
    now[0] += 0.1  # the first slot leaves the 60 s window
    assert await a.run_once() == 1
    granted = await waiter
    assert isinstance(granted, Grant) and granted.waited_seconds == pytest.approx(60.0)
    await a.stop()


async def test_a_restarted_driver_gets_its_dead_runs_permits_back_after_the_attempt_bound() -> None:
    """A killed driver's grants expire at granted_at + attempt timeout, not the TTL."""
    from cluster.admission import ActorGate
    from cluster.drivers import TaskDriver
    from pipeline.settings import Settings
    from pipeline.worker import WorkerConfig

    a = actor(max_in_flight=3, grant_ttl_seconds=60)
    client = AdmissionClient(LocalActorHandle(a), scope="unit")

    def gate(holder: str, run: str) -> ActorGate:
        return ActorGate(client, holder=holder, holder_run=run)

    ask = AdmissionRequest("t", 10, 10)
    dead = [await gate("driver-0", "run-1").acquire(ask, timeout=0) for _ in range(2)]
    other = await gate("driver-1", "run-1").acquire(ask, timeout=0)  # another driver, alive
    assert all(isinstance(g, Grant) and g.holder == "driver-0" for g in dead)
    worker = WorkerConfig(worker_id="driver-0", attempt_timeout_seconds=0.3)
    restarted = TaskDriver(Settings(), worker, engine=None)  # type: ignore[arg-type]
    new_gate = gate("driver-0", restarted.run_id)
    started = time.monotonic()
    await restarted._abandon_earlier_runs(new_gate)
    # Not before the dead run's attempts could have timed out: the budget holds.
    assert isinstance(await new_gate.acquire(ask, timeout=0), Wait)
    mine = await new_gate.acquire(ask, timeout=5)
    waited = time.monotonic() - started
    assert isinstance(mine, Grant) and mine.holder_run == restarted.run_id
    assert 0.1 < waited < 5  # the attempt bound (0.3 s after the grants), not the 60 s TTL
    snap = await a.snapshot()
    assert snap["expired_total"] == 2 and snap["in_flight"] == 2  # `other` and `mine`
    assert snap["window_tokens"] == 4 * 20  # the dead run's grants stay fully charged
    # A second restart abandons nothing of the current run or of another driver.
    assert await new_gate.abandon_earlier_runs(0.3) == 0
    assert await client.release(other, Usage(1, 1)) is not None
    await a.stop()


async def test_abandon_expires_at_once_when_the_attempt_bound_has_passed() -> None:
    a = actor(max_in_flight=1, grant_ttl_seconds=60)
    g = await a.acquire(AdmissionRequest("t", 10, 10, holder="d", holder_run="old"))
    assert isinstance(g, Grant)
    await asyncio.sleep(0.05)
    assert await a.abandon("d", "new", call_bound_seconds=0.01) == 1
    assert (await a.snapshot())["in_flight"] == 0
    assert await a.release(g, Usage(1, 1)) is None  # a late release: stays charged
    assert (await a.snapshot())["window_tokens"] == 20
    await a.stop()
