"""One long-context job and many short ones share an engine's token budget.

The shipped CPU pools (``short`` served_by ``long``) give one engine scope with a
budget of concurrent reserved tokens from its KV cache (20,970 of 23,301 tokens).
Attempts go through the drivers' own path (:class:`RoutedGate` over
:class:`ActorGate` over the actor, the ledger on real PostgreSQL). The ledger is
the proof: replaying every grant's ``[granted_at, settled_at)``, the tokens
reserved at once never exceed the budget, and every short job is granted and
settled while the long job still holds its 8,100-token reservation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from cluster.admission import (
    ActorGate,
    AdmissionActor,
    AdmissionClient,
    LocalActorHandle,
    RoutedGate,
)
from cluster.runtime_config import runtime_config_for
from deployments.pools import DEFAULT_POOLS_PATH, load_pools
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant
from pipeline.jobs import JobStore
from pipeline.usage import Usage
from tests.support.jobs import accept_many, new_tenant

pytestmark = pytest.mark.integration

LONG = (7000, 1100)  # prompt, max output: the long pool (<= 8,192)
SHORT = (1500, 700)  # the short pool (<= 4,096)
SHORT_JOBS = 40
HOLD_S = 0.05  # engine time of a short attempt


async def test_long_and_short_jobs_share_one_engine_budget_and_shorts_flow(
    dsn: str, pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path))  # the same numbers anywhere
    runtime = runtime_config_for(load_pools(DEFAULT_POOLS_PATH))
    [engine] = runtime.engine_scopes
    budget = engine.admission["max_concurrent_tokens"]
    assert budget == 20_970
    actor = AdmissionActor(
        AdmissionConfig(scope=engine.scope, **{**engine.admission, "grant_ttl_seconds": 600.0}),
        database_url=dsn,
    )
    client = AdmissionClient(LocalActorHandle(actor), scope=engine.scope)
    gate = RoutedGate({engine.scope: ActorGate(client)}, runtime.pool_routes)

    reader, writer = await new_tenant(pool), await new_tenant(pool)
    store = JobStore(pool)
    [long_job] = await accept_many(store, reader, 1)
    short_jobs = await accept_many(store, writer, SHORT_JOBS)

    async def attempt(tenant: str, job: str, tokens: tuple[int, int]) -> Grant:
        grant = await gate.acquire(
            AdmissionRequest(tenant, tokens[0], tokens[1], job_id=job, fence=1), timeout=30.0
        )
        assert isinstance(grant, Grant)
        return grant

    async def short(job: str) -> None:
        grant = await attempt(str(writer.id), job, SHORT)
        await asyncio.sleep(HOLD_S)
        await gate.release(grant, usage=Usage(1400, 300), uncertain=False)

    held = await attempt(str(reader.id), str(long_job), LONG)
    await asyncio.wait_for(asyncio.gather(*(short(str(j)) for j in short_jobs)), 60)
    assert (await actor.snapshot())["in_flight"] == 1  # the long job still holds its grant
    await gate.release(held, usage=Usage(6900, 900), uncertain=False)
    await actor.stop()  # waits for the ledger writes

    rows = await pool.fetch(
        "SELECT job_id, reserved_tokens, outcome, granted_at, settled_at FROM admission_grants"
        " WHERE scope = $1",
        engine.scope,
    )
    assert len(rows) == 1 + SHORT_JOBS
    assert {r["outcome"] for r in rows} == {"reconciled"}
    [long_row] = [r for r in rows if r["job_id"] == long_job]
    shorts = [r for r in rows if r["job_id"] != long_job]
    assert long_row["reserved_tokens"] == sum(LONG)
    assert {r["reserved_tokens"] for r in shorts} == {sum(SHORT)}
    # Not starved: every short job was granted and settled inside the long one's hold.
    assert all(long_row["granted_at"] < r["granted_at"] for r in shorts)
    assert max(r["settled_at"] for r in shorts) < long_row["settled_at"]

    # Never over budget: replay the ledger (grants before settlements at equal times,
    # the stricter order).
    events = sorted(
        [(r["granted_at"], 0, r["reserved_tokens"]) for r in rows]
        + [(r["settled_at"], 1, -r["reserved_tokens"]) for r in rows]
    )
    reserved, peak = 0, 0
    for _at, _kind, delta in events:
        reserved += delta
        peak = max(peak, reserved)
    assert reserved == 0
    assert peak <= budget
    # ... and the budget was what held the shorts back: the peak left no room for one
    # more short attempt (the in-flight cap of 16 would have let 15 run beside the long).
    assert peak > budget - sum(SHORT)
