"""Batched completion on real PostgreSQL: one transaction, each attempt under its own fence."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence

import asyncpg
import pytest

from pipeline.clock import ManualClock
from pipeline.errors import LeaseLost
from pipeline.jobs import GroupCommit, JobStore, Lease, Settled, Success
from pipeline.jobs.settling import event_payload
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.usage import AttemptUsage
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


async def stale_and_fresh(pool: asyncpg.Pool, fresh: int) -> tuple[JobStore, Lease, list[Lease]]:
    """A store on a manual clock, a zombie's lease and ``fresh`` leases that still hold.

    The zombie's job was reaped (fence + 1) and claimed again by a newer owner
    (fence + 2): it is RUNNING, so only the fence tells the zombie apart.
    """
    clock = ManualClock()
    store = JobStore(pool, Settings(lease_seconds=30), clock=clock)
    tenant = await new_tenant(pool)
    await store.accept(request(tenant))
    (zombie,) = await store.claim("zombie")
    clock.advance(31)
    assert (await store.reap()).rescheduled == [zombie.job_id]
    async with pool.acquire() as conn:  # due now, not after the retry delay
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = $1 WHERE id = $2",
            clock.now(),
            zombie.job_id,
        )
    (newer,) = await store.claim("newer")
    assert newer.job_id == zombie.job_id and newer.fence == zombie.fence + 2
    for _ in range(fresh):
        await store.accept(request(tenant))
    leases = await store.claim("driver", limit=fresh)
    assert len(leases) == fresh and zombie.job_id not in {lease.job_id for lease in leases}
    return store, zombie, leases


async def job_rows(pool: asyncpg.Pool, ids: list[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT j.id, j.state, j.fence, j.last_error,"
            " (SELECT count(*) FROM extraction_results r WHERE r.job_id = j.id) AS results,"
            " (SELECT count(*) FROM outbox_events o WHERE o.job_id = j.id"
            "   AND o.event_type <> 'extraction.requested.v1') AS events,"
            " (SELECT a.outcome || ':' || coalesce(a.completion_tokens, -1) FROM job_attempts a"
            "   WHERE a.job_id = j.id ORDER BY a.fence DESC LIMIT 1) AS attempt"
            " FROM extraction_jobs j WHERE j.id = ANY($1)",
            ids,
        )
    return {r["id"]: r for r in rows}


async def test_a_batch_with_one_stale_fence_commits_the_others_and_reports_the_stale_one(
    pool: asyncpg.Pool,
) -> None:
    store, zombie, (a, b, c) = await stale_and_fresh(pool, 3)
    hooked: list[uuid.UUID] = []

    async def hook(_conn: asyncpg.Connection, s: Settled) -> None:
        hooked.append(s.job_id)

    store.settle_hooks.add(hook)
    usage = AttemptUsage(prompt_tokens=100, completion_tokens=7, engine="vllm:short")
    batch = [
        Success(a, result={"n": "a"}, usage=usage),
        Success(zombie, result={"n": "zombie"}, usage=usage),
        Success(
            b,
            result={"n": "b"},
            validation={"reasons": [{"code": "arithmetic_mismatch"}]},
            decision=JobState.REVIEW_REQUIRED,
            policy_version="p1",
        ),
        Success(c, result={"n": "c"}, usage=usage),
    ]
    outcome = await store.succeed_many(batch)

    assert [s.job_id for s in outcome.settled] == [a.job_id, b.job_id, c.job_id]  # batch order
    assert [s.state for s in outcome.settled] == [
        JobState.SUCCEEDED,
        JobState.REVIEW_REQUIRED,
        JobState.SUCCEEDED,
    ]
    assert outcome.lost == [zombie]
    assert sorted(hooked) == sorted([a.job_id, b.job_id, c.job_id])  # in the transaction
    rows = await job_rows(pool, [a.job_id, b.job_id, c.job_id, zombie.job_id])
    for lease in (a, c):
        row = rows[lease.job_id]
        assert (row["state"], row["results"], row["events"]) == ("SUCCEEDED", 1, 1)
        assert row["attempt"] == "succeeded:7" and row["fence"] == lease.fence
    review = rows[b.job_id]
    assert (review["state"], review["results"], review["events"]) == ("REVIEW_REQUIRED", 1, 1)
    assert (
        review["last_error"] == "arithmetic_mismatch" and review["attempt"] == "review_required:-1"
    )
    stale = rows[zombie.job_id]
    # The zombie wrote nothing: the job still runs under the newer owner's fence.
    assert (stale["state"], stale["results"], stale["events"]) == ("RUNNING", 0, 0)
    assert stale["fence"] == zombie.fence + 2 and stale["attempt"] == "running:-1"
    # Settled is final: the same batch again settles nothing.
    again = await store.succeed_many(batch)
    assert again.settled == [] and again.lost == [s.lease for s in batch]


async def test_a_batched_event_is_the_one_a_single_settle_writes(pool: asyncpg.Pool) -> None:
    """The batch builds its events in SQL: same type, payload and trace as succeed()."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    for _ in range(3):
        await store.accept(request(tenant))
    one, two, three = await store.claim("driver", limit=3)
    single = await store.succeed(one, result={"n": 1})
    batch = await store.succeed_many(
        [
            Success(two, result={"n": 2}),
            Success(three, result={"n": 3}, decision=JobState.REVIEW_REQUIRED),
        ]
    )
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT o.job_id, o.event_type, o.payload, o.traceparent = j.traceparent AS traced"
            " FROM outbox_events o JOIN extraction_jobs j ON j.id = o.job_id"
            " WHERE o.event_type <> 'extraction.requested.v1' AND o.job_id = ANY($1)",
            [one.job_id, two.job_id, three.job_id],
        )
    events = {r["job_id"]: r for r in rows}
    assert len(events) == 3 and all(r["traced"] for r in rows)
    for settled in (single, *batch.settled):
        expected_type = (
            "extraction.completed.v1"
            if settled.state is JobState.SUCCEEDED
            else "extraction.review_required.v1"
        )
        assert events[settled.job_id]["event_type"] == expected_type
        assert events[settled.job_id]["payload"] == event_payload(settled)


@pytest.mark.parametrize("hooked", [False, True], ids=["one-statement", "with-a-hook"])
async def test_an_attempt_row_no_longer_running_rolls_the_whole_batch_back(
    pool: asyncpg.Pool, hooked: bool
) -> None:
    """Without hooks the statement is the whole transaction: the statement itself fails
    (FL001), so nothing of the batch is written either way."""
    store = JobStore(pool, Settings())
    ran: list[uuid.UUID] = []

    async def hook(_conn: asyncpg.Connection, s: Settled) -> None:
        ran.append(s.job_id)

    if hooked:
        store.settle_hooks.add(hook)
    tenant = await new_tenant(pool)
    for _ in range(2):
        await store.accept(request(tenant))
    first, second = await store.claim("driver", limit=2)
    async with pool.acquire() as conn:  # a corrupt attempt row: closed, its job still running
        await conn.execute(
            "UPDATE job_attempts SET outcome = 'lease_expired', ended_at = now()"
            " WHERE job_id = $1 AND fence = $2",
            second.job_id,
            second.fence,
        )
    with pytest.raises(LeaseLost, match="attempt already closed"):
        await store.succeed_many([Success(first, result={}), Success(second, result={})])
    rows = await job_rows(pool, [first.job_id, second.job_id])
    assert [(r["state"], r["results"], r["events"]) for r in rows.values()] == [
        ("RUNNING", 0, 0),
        ("RUNNING", 0, 0),
    ]
    assert ran == []  # the statement failed before any hook ran


class CountingBatchHook:
    """A BatchSettleHook that records its calls."""

    def __init__(self) -> None:
        self.batches: list[list[uuid.UUID]] = []
        self.singles: list[uuid.UUID] = []

    async def __call__(self, _conn: asyncpg.Connection, settled: Settled) -> None:
        self.singles.append(settled.job_id)

    async def many(self, _conn: asyncpg.Connection, settled: Sequence[Settled]) -> None:
        self.batches.append([s.job_id for s in settled])


async def test_a_batch_hook_takes_the_batch_once_and_a_plain_hook_each_job(
    pool: asyncpg.Pool,
) -> None:
    store, zombie, leases = await stale_and_fresh(pool, 3)
    batched = CountingBatchHook()
    plain: list[uuid.UUID] = []

    async def hook(_conn: asyncpg.Connection, s: Settled) -> None:
        plain.append(s.job_id)

    store.settle_hooks.extend([batched, hook])
    outcome = await store.succeed_many([Success(lease, result={}) for lease in [*leases, zombie]])
    settled = sorted(lease.job_id for lease in leases)  # job-id order; the stale one not
    assert outcome.lost == [zombie]
    assert batched.batches == [settled] and batched.singles == []
    assert plain == settled
    # succeed() calls the same hook once, for its one job.
    await store.accept(request(await new_tenant(pool)))
    (one,) = await store.claim("driver")
    await store.succeed(one, result={})
    assert batched.singles == [one.job_id] and len(batched.batches) == 1


async def test_a_failing_hook_rolls_the_whole_batch_back(pool: asyncpg.Pool) -> None:
    store, _, leases = await stale_and_fresh(pool, 3)
    bad = leases[1].job_id

    async def hook(_conn: asyncpg.Connection, s: Settled) -> None:
        if s.job_id == bad:
            raise RuntimeError("delivery hook failed")

    store.settle_hooks.add(hook)
    with pytest.raises(RuntimeError, match="delivery hook failed"):
        await store.succeed_many([Success(lease, result={}) for lease in leases])
    rows = await job_rows(pool, [lease.job_id for lease in leases])
    assert {(r["state"], r["results"], r["events"]) for r in rows.values()} == {("RUNNING", 0, 0)}


async def test_a_batch_refuses_a_job_twice(pool: asyncpg.Pool) -> None:
    store, _, (a,) = await stale_and_fresh(pool, 1)
    with pytest.raises(ValueError, match="twice"):
        await store.succeed_many([Success(a, result={}), Success(a, result={})])
    assert (await job_rows(pool, [a.job_id]))[a.job_id]["state"] == "RUNNING"


async def test_group_commit_settles_what_finishes_together_in_one_transaction(
    pool: asyncpg.Pool,
) -> None:
    store, zombie, (*leases, d) = await stale_and_fresh(pool, 4)
    commits = GroupCommit(store, max_batch=16)
    answers = await asyncio.gather(
        *(commits.succeed(Success(lease, result={})) for lease in [*leases, zombie]),
        return_exceptions=True,
    )
    assert commits.batches == {4: 1}  # one transaction for all four
    assert [a.job_id for a in answers[:3] if isinstance(a, Settled)] == [
        lease.job_id for lease in leases
    ]
    assert isinstance(answers[3], LeaseLost)  # the stale one alone
    # One that finishes alone commits at once, alone.
    assert (await commits.succeed(Success(d, result={}))).state is JobState.SUCCEEDED
    assert commits.batches == {4: 1, 1: 1}


async def test_group_commit_settles_a_failed_batch_one_by_one(pool: asyncpg.Pool) -> None:
    store, _, leases = await stale_and_fresh(pool, 3)
    bad = leases[0].job_id

    async def hook(_conn: asyncpg.Connection, s: Settled) -> None:
        if s.job_id == bad:
            raise RuntimeError("hook failed")

    store.settle_hooks.add(hook)
    commits = GroupCommit(store)
    answers = await asyncio.gather(
        *(commits.succeed(Success(lease, result={})) for lease in leases), return_exceptions=True
    )
    assert commits.batches == {3: 1}
    assert isinstance(answers[0], RuntimeError)  # only the attempt whose hook failed
    assert [a.state for a in answers[1:] if isinstance(a, Settled)] == [JobState.SUCCEEDED] * 2
    rows = await job_rows(pool, [lease.job_id for lease in leases])
    assert [rows[lease.job_id]["state"] for lease in leases] == [
        "RUNNING",
        "SUCCEEDED",
        "SUCCEEDED",
    ]


async def test_a_batched_statement_audits_and_notifies_every_row_it_changes(
    pool: asyncpg.Pool,
) -> None:
    """The audit trigger runs once per statement (migration 016) but still writes one
    job_events row and one notification per job whose state or fence changed, and
    none for a row whose update changed neither (a heartbeat)."""
    store, zombie, leases = await stale_and_fresh(pool, 4)
    heard: list[dict[str, object]] = []

    def hear(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        heard.append(json.loads(payload))

    listener = await pool.acquire()
    await listener.add_listener("fenceline_job_events", hear)
    try:
        assert await store.heartbeat(leases[0]) is not None  # lease moved, state and fence not
        outcome = await store.succeed_many(
            [Success(lease, result={}) for lease in leases] + [Success(zombie, result={})]
        )
        assert outcome.lost == [zombie]
        for _ in range(100):
            if len(heard) >= len(leases):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # anything more would arrive now
    finally:
        await listener.remove_listener("fenceline_job_events", hear)
        await pool.release(listener)
    ids = [lease.job_id for lease in leases]
    async with pool.acquire() as conn:
        events = await conn.fetch(
            "SELECT job_id, from_state, to_state, state_version, fence FROM job_events"
            " WHERE job_id = ANY($1) ORDER BY job_id, seq",
            [*ids, zombie.job_id],
        )
        versions = dict(
            await conn.fetch(
                "SELECT id, state_version FROM extraction_jobs WHERE id = ANY($1)", ids
            )
        )
    by_job: dict[uuid.UUID, list[tuple[object, ...]]] = {}
    for e in events:
        by_job.setdefault(e["job_id"], []).append(
            (e["from_state"], e["to_state"], e["state_version"], e["fence"])
        )
    for lease in leases:  # accepted, claimed, settled: nothing for the heartbeat
        assert [(f, t) for f, t, _, _ in by_job[lease.job_id]] == [
            (None, "READY"),
            ("READY", "RUNNING"),
            ("RUNNING", "SUCCEEDED"),
        ]
        last = by_job[lease.job_id][-1]
        assert last[2] == versions[lease.job_id] and last[3] == lease.fence
    assert sorted(str(h["job_id"]) for h in heard) == sorted(str(i) for i in ids)
    assert {h["state"] for h in heard} == {"SUCCEEDED"}
    assert {str(h["job_id"]): h["state_version"] for h in heard} == {
        str(i): v for i, v in versions.items()
    }
