"""The AdmissionActor on a real local Ray cluster: one named actor per scope,
callers in several processes never exceed its permits, and a dead actor makes
clients fail closed or fall back to their bounded emergency allowance.

One small cluster for the module (num_cpus=2, no dashboard, 100 MB object
store); it is ours alone (``address="local"``) and shut down with
``ray.shutdown()``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.admission import (
    AdmissionClient,
    EmergencyAllowance,
    actor_name,
    admission_actor,
)
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant, Wait, WaitReason
from pipeline.errors import ReservationTooLarge
from pipeline.usage import Usage

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
#: Generous: on a shared, overloaded 2-core machine a live actor can take seconds to
#: answer, and a call that times out would be counted as an outage.
MARGIN = 30.0
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def ray_namespace() -> Iterator[str]:
    import ray

    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    namespace = f"adm-e2e-{uuid.uuid4().hex[:8]}"
    ray.init(
        address="local",  # a cluster of our own, never another engineer's
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100_000_000,
        namespace=namespace,
        runtime_env={"env_vars": {**RAY_ENV, "PYTHONPATH": str(ROOT)}},
        log_to_driver=False,
    )
    try:
        yield namespace
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_callers(scope: str, namespace: str, tenants: list[str], rounds: int) -> list[tuple]:
    """Body of one caller process: concurrent acquire → hold → release cycles.

    Each record is (tenant, held_from, held_until) in wall-clock time, taken
    after the grant arrived and before the release is sent, so it lies inside
    the interval the actor counted the grant as in flight.
    """

    async def main() -> list[tuple]:
        client = AdmissionClient.for_scope(scope, namespace=namespace, call_margin_seconds=MARGIN)
        held: list[tuple] = []

        async def caller(tenant: str) -> None:
            for _ in range(rounds):
                g = await client.acquire(AdmissionRequest(tenant, 400, 200), timeout=60)
                assert isinstance(g, Grant), g
                start = time.time()
                await asyncio.sleep(random.uniform(0.01, 0.04))
                held.append((tenant, start, time.time()))
                await client.release(g, Usage(prompt_tokens=350, completion_tokens=120))

        await asyncio.gather(*(caller(t) for t in tenants))
        return held

    return asyncio.run(main())


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at once (closed intervals: a tie counts as overlap)."""
    events = sorted([(s, 0) for s, _ in intervals] + [(e, 1) for _, e in intervals])
    peak = current = 0
    for _, kind in events:
        current += 1 if kind == 0 else -1
        peak = max(peak, current)
    return peak


async def test_callers_in_several_processes_never_exceed_the_permits(ray_namespace: str) -> None:
    import ray

    scope = f"e2e-permits-{uuid.uuid4().hex[:6]}"
    cfg = AdmissionConfig(scope=scope, max_in_flight=3, tenant_max_in_flight=2, tpm=10_000_000)
    handle = admission_actor(actor_name(scope), cfg, namespace=ray_namespace)
    await handle.start.remote()
    # One actor per scope: a second builder call (another pod) gets the same actor.
    again = admission_actor(actor_name(scope), cfg.model_copy(update={"max_in_flight": 99}))
    assert (await again.snapshot.remote())["limits"]["max_in_flight"] == 3

    remote_callers = ray.remote(num_cpus=0)(run_callers)
    tenants = ["t-a", "t-b", "t-c", "t-a"]
    refs = [remote_callers.remote(scope, ray_namespace, tenants, 3) for _ in range(3)]
    local = await asyncio.to_thread(run_callers, scope, ray_namespace, tenants, 3)
    held = [row for rows in await asyncio.gather(*refs) for row in rows] + local

    assert len(held) == 4 * 4 * 3
    assert peak_overlap([(s, e) for _, s, e in held]) == 3
    for tenant in ("t-a", "t-b", "t-c"):
        assert peak_overlap([(s, e) for t, s, e in held if t == tenant]) <= 2
    snap = await handle.snapshot.remote()
    assert (snap["in_flight"], snap["granted_total"], snap["waiters"]) == (0, 48, 0)
    assert snap["window_tokens"] == 48 * 470

    client = AdmissionClient(handle, scope=scope, call_margin_seconds=MARGIN)
    with pytest.raises(ReservationTooLarge):  # the actor's own error crosses Ray unchanged
        await client.acquire(AdmissionRequest("t-a", 10_000_000, 1))
    assert not client.unreachable
    ray.kill(handle, no_restart=True)


def sample(client: AdmissionClient, name: str, **labels: str) -> float:
    value = client.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_dead_actor_fails_closed_or_uses_the_bounded_emergency_allowance(
    ray_namespace: str,
) -> None:
    import ray

    scope = f"e2e-down-{uuid.uuid4().hex[:6]}"
    handle = admission_actor(
        actor_name(scope), AdmissionConfig(scope=scope, max_in_flight=8), namespace=ray_namespace
    )
    closed = AdmissionClient.for_scope(
        scope, namespace=ray_namespace, retry_seconds=30, call_margin_seconds=MARGIN
    )
    emergency = AdmissionClient.for_scope(
        scope,
        namespace=ray_namespace,
        on_unreachable="emergency",
        emergency=EmergencyAllowance(
            max_in_flight=1, tokens_per_minute=1000, requests_per_minute=5
        ),
    )
    live = await closed.acquire(AdmissionRequest("t", 100, 100), timeout=5)
    assert isinstance(live, Grant) and not live.emergency

    ray.kill(handle, no_restart=True)

    refused = await closed.acquire(AdmissionRequest("t", 100, 100), timeout=1)
    assert refused == Wait(30, WaitReason.LIMITER_UNREACHABLE)
    assert closed.unreachable
    assert sample(closed, "fenceline_admission_limiter_unreachable_total", operation="acquire") == 1
    assert sample(closed, "fenceline_admission_fail_closed_total") == 1
    assert sample(closed, "fenceline_admission_limiter_up") == 0
    # Within retry_seconds the dead actor is not called again (no pile-up of failures).
    await closed.acquire(AdmissionRequest("t", 100, 100), timeout=1)
    assert sample(closed, "fenceline_admission_limiter_unreachable_total", operation="acquire") == 1
    assert sample(closed, "fenceline_admission_fail_closed_total") == 2
    assert await closed.release(live, Usage(10, 10)) is None  # the actor's TTL settles it

    first = await emergency.acquire(AdmissionRequest("t", 300, 200), timeout=0)
    assert isinstance(first, Grant) and first.emergency
    blocked = await emergency.acquire(
        AdmissionRequest("u", 100, 100), timeout=0
    )  # 1 in flight locally
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.LIMITER_UNREACHABLE
    rec = await emergency.release(first, Usage(250, 100))
    assert rec is not None and rec.charged_tokens == 350
    second = await emergency.acquire(AdmissionRequest("u", 300, 300), timeout=0)
    assert isinstance(second, Grant) and second.emergency
    await emergency.release(second, Usage(100, 100))
    over_tpm = await emergency.acquire(
        AdmissionRequest("u", 300, 300), timeout=0
    )  # 350 + 200 + 600 > 1000
    assert isinstance(over_tpm, Wait) and over_tpm.reason is WaitReason.LIMITER_UNREACHABLE
    too_big = await emergency.acquire(
        AdmissionRequest("u", 2000, 0), timeout=0
    )  # never fits the allowance
    assert isinstance(too_big, Wait) and too_big.reason is WaitReason.LIMITER_UNREACHABLE
    assert sample(emergency, "fenceline_admission_emergency_grants_total") == 2


async def test_restarted_actor_is_reached_again_by_name(ray_namespace: str) -> None:
    import ray

    scope = f"e2e-restart-{uuid.uuid4().hex[:6]}"
    handle = admission_actor(
        actor_name(scope), AdmissionConfig(scope=scope, max_in_flight=2), namespace=ray_namespace
    )
    client = AdmissionClient.for_scope(
        scope, namespace=ray_namespace, retry_seconds=0.2, call_margin_seconds=MARGIN
    )
    g = await client.acquire(AdmissionRequest("t", 10, 10), timeout=5)
    assert isinstance(g, Grant)
    before = (await client.snapshot())["incarnation"]
    ray.kill(handle, no_restart=False)  # Ray restarts it (max_restarts=-1)
    # ray.kill only asks: until the old incarnation is gone it may still answer
    # (and grant). Wait for the new one before asking for a grant from it.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if (await client.snapshot())["incarnation"] != before:
                break
        except Exception:  # unavailable while Ray restarts it
            pass
        await asyncio.sleep(0.25)
    else:
        raise AssertionError("the admission actor was not restarted within 60 s")
    result: Any = None
    while time.monotonic() < deadline:
        result = await client.acquire(AdmissionRequest("t", 10, 10), timeout=2)
        if isinstance(result, Grant):
            break
        assert result.reason is WaitReason.LIMITER_UNREACHABLE
        await asyncio.sleep(0.25)
    assert isinstance(result, Grant), result
    assert not client.unreachable and sample(client, "fenceline_admission_limiter_up") == 1
    # A fresh incarnation (no ledger configured here): the old grant is unknown to it.
    assert await client.release(g, Usage(5, 5)) is None
    # Right after a restart Ray may answer a call with "the actor was restarted; the
    # task may or may not have run" (the client reports None): the grant stays open
    # on the actor, so asking again settles it exactly once.
    for _ in range(40):
        rec = await client.release(result, Usage(5, 5))
        if rec is not None:
            break
        await asyncio.sleep(0.25)
    assert rec is not None and rec.charged_tokens == 10
    ray.kill(handle, no_restart=True)
