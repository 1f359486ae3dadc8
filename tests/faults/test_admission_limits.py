"""The global admission budget end to end: Ray drivers, the admission actor, the fake provider.

* With RPM=60, TPM=20,000 and 4 permits, 120 jobs through two Ray task drivers
  never make the provider see a 60-second window over either limit, nor more
  than 4 calls at once.
* A 429 storm with Retry-After makes every driver back off together (the
  cooldown is shared through the actor), and provider calls stay within the
  jobs' attempt budget.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from cluster.admission import actor_name, admission_actor
from cluster.drivers import EngineSpec, build_driver
from pipeline.extraction.answer import ANSWER_KEYS, parse_answer
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.settings import Settings
from pipeline.worker import WorkerConfig
from tests.support.drivers import wait_settled
from tests.support.jobs import new_tenant

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(600)]

#: A contract-valid answer with nothing extracted: one call settles the job (review).
EMPTY_ANSWER = dict.fromkeys(ANSWER_KEYS) | {"items": [], "taxes": []}


def test_the_empty_answer_is_the_contract() -> None:
    parse_answer(json.dumps(EMPTY_ANSWER))


async def start_runtime(
    dsn: str, fake: FakeProvider, scope: str, limits: dict[str, Any], drivers: int = 2
) -> list[Any]:
    actor = admission_actor(
        actor_name(scope), {"scope": scope, **limits}, database_url=dsn, detached=False
    )
    await actor.start.remote()
    settings = Settings(database_url=dsn)
    out = []
    for i in range(drivers):
        worker = WorkerConfig(
            worker_id=f"{scope}-d{i}",
            concurrency=4,
            max_output_tokens=64,
            idle_poll_seconds=0.2,
            admission_timeout_seconds=120,
        )
        d = build_driver(
            settings,
            worker,
            EngineSpec(kind="openai", base_url=fake.base_url, model="fake"),
            admission_scope=scope,
        )
        out.append(d)
    await asyncio.gather(*(d.start.remote() for d in out))
    out.append(actor)
    return out


async def stop_runtime(actors: list[Any]) -> None:
    import ray

    *drivers, _admission = actors
    await asyncio.gather(*(d.stop.remote(5.0) for d in drivers))
    for a in actors:
        ray.kill(a)


async def accept(store: JobStore, tenants: list[Any], n: int) -> None:
    for i in range(n):
        t = tenants[i % len(tenants)]
        await store.accept(AcceptRequest(t.id, f"k{i}", DocumentIn(f"INV-{i} total 10.00 EUR")))


def windows(calls: list[Any], span: float = 60.0) -> tuple[int, int, int]:
    """Max calls and max tokens in any span-second window, and max overlap in flight."""
    times = sorted((c.at, c.prompt_tokens + c.completion_tokens) for c in calls)
    max_calls = max_tokens = 0
    for i, (t, _) in enumerate(times):
        inside = [tok for (u, tok) in times[: i + 1] if u > t - span]
        max_calls = max(max_calls, len(inside))
        max_tokens = max(max_tokens, sum(inside))
    edges = sorted(
        [(c.at, 1) for c in calls] + [(c.at + c.latency_s, -1) for c in calls],
        key=lambda e: (e[0], e[1]),
    )
    depth = peak = 0
    for _, d in edges:
        depth += d
        peak = max(peak, depth)
    return max_calls, max_tokens, peak


JOBS = 120


async def test_rpm_tpm_and_permits_hold_across_ray_drivers(
    ray_cluster: None, pool: asyncpg.Pool, dsn: str
) -> None:
    """Two Ray task drivers share the named admission actor; the provider never sees
    a 60-second window over RPM or TPM, nor more than 4 calls at once, and the
    ledger's reconciled charges are exactly what the provider counted."""
    store = JobStore(pool)
    tenants = [await new_tenant(pool) for _ in range(2)]
    # 120 jobs: twice the RPM, so the second minute's calls wait on the first window.
    await accept(store, tenants, JOBS)
    limits = {"rpm": 60, "tpm": 20_000, "max_in_flight": 4}
    with FakeProvider(answer=lambda _body: EMPTY_ANSWER) as fake:
        fake.set_faults({"latency": {"dist": "uniform", "a": 0.05, "b": 0.2}})
        actors = await start_runtime(dsn, fake, "limits", limits)
        try:
            rows = await wait_settled(pool, JOBS, timeout=480)
            snap = await actors[-1].snapshot.remote()
        finally:
            await stop_runtime(actors)
        calls = fake.calls()
    assert len(rows) == JOBS
    assert len(calls) == JOBS  # every job settled (REVIEW_REQUIRED) in one call
    max_calls, max_tokens, peak = windows(calls)
    assert max_calls <= 60, max_calls
    assert max_tokens <= 20_000, max_tokens
    assert max_tokens > 15_000  # the budget, not something else, was the bound
    assert peak <= 4, peak
    assert snap["granted_total"] == JOBS and snap["expired_total"] == 0, snap
    async with pool.acquire() as conn:
        ledger = await conn.fetch(
            "SELECT outcome, charged_tokens FROM admission_grants WHERE scope = 'limits'"
        )
    assert {r["outcome"] for r in ledger} == {"reconciled"}
    provider_tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    assert sum(r["charged_tokens"] for r in ledger) == provider_tokens


async def test_429_storm_makes_all_drivers_back_off_together(
    ray_cluster: None, pool: asyncpg.Pool, dsn: str
) -> None:
    store = JobStore(pool)
    tenants = [await new_tenant(pool)]
    await accept(store, tenants, 20)
    with FakeProvider(answer=lambda _body: EMPTY_ANSWER) as fake:
        fake.set_faults(
            {
                "script": [{"kind": "429", "count": 6, "retry_after": "4"}],
                "latency": {"dist": "fixed", "a": 0.05},
            }
        )
        actors = await start_runtime(dsn, fake, "storm", {"max_in_flight": 4})
        try:
            rows = await wait_settled(pool, 20, timeout=120)
        finally:
            await stop_runtime(actors)
        calls = fake.calls()
    assert {r["state"] for r in rows} == {"REVIEW_REQUIRED"}
    limited = [c for c in calls if c.status == 429]
    assert len(limited) == 6
    first_429_answered = min(c.at + c.latency_s for c in limited)
    # Calls already in flight may still land; nothing new starts inside the cooldown.
    started_in_cooldown = [
        c for c in calls if first_429_answered + 0.5 < c.at < first_429_answered + 3.5
    ]
    assert started_in_cooldown == []
    assert len(calls) <= 5 * 20  # within max attempts per job
    assert len(calls) == 20 + 6  # each 429 cost exactly one extra attempt
