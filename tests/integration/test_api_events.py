"""Server-Sent Events status streams through a real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.api.status_stream import StreamCursor
from pipeline.database import create_pool
from pipeline.errors import ProviderUnavailable
from pipeline.jobs import JobStore
from tests.support.api import (
    SseEvent,
    TenantKey,
    iter_sse,
    loopback_server,
    read_sse,
    settings_for,
    settle_leftovers,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn(module_dsn: str) -> str:
    """One database per module; each test starts with no runnable job of another test."""
    return module_dsn


@pytest.fixture(autouse=True)
async def _isolated(module_dsn: str) -> None:
    await settle_leftovers(module_dsn)


#: Long enough that a passing test proves NOTIFY woke the stream, not the poll.
SLOW_POLL = {"sse_poll_seconds": 60.0, "sse_keepalive_seconds": 60.0}


async def _accept(client: httpx.AsyncClient, tk: TenantKey) -> uuid.UUID:
    r = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    assert r.status_code == 202, r.text
    return uuid.UUID(r.json()["job_id"])


async def _seqs(pool: asyncpg.Pool, job_id: uuid.UUID) -> list[int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT seq FROM job_events WHERE job_id = $1 ORDER BY seq", job_id)
    return [r["seq"] for r in rows]


def _states(events: list[SseEvent]) -> list[str]:
    return [e.data["state"] for e in events if e.event == "state"]


def _assert_monotonic(events: list[SseEvent]) -> None:
    ids = [int(e.id) for e in events if e.id is not None]
    assert ids == sorted(ids), ids
    versions: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if e.event == "state":
            versions[e.data["job_id"]].append(e.data["state_version"])
    for job, vs in versions.items():
        assert vs == sorted(set(vs)), (job, vs)


async def test_job_stream_snapshot_then_live_changes_until_final(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, **SLOW_POLL), pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        async with c.stream("GET", f"/v1/extraction-jobs/{job_id}/events", headers=tk.headers) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = iter_sse(r)
            first = await anext(events)
            (lease,) = await store.claim("w1")
            await store.succeed(lease, result={"total": "1.00"})
            rest = await read_sse(events)
    assert first.event == "state" and first.data["snapshot"] is True
    assert first.data["state"] == "READY" and int(first.id or 0) == (await _seqs(pool, job_id))[0]
    all_events = [first, *rest]
    assert _states(all_events) == ["READY", "RUNNING", "SUCCEEDED"]
    assert [e.data["state_version"] for e in all_events if e.event == "state"] == [1, 2, 3]
    assert rest[-1].event == "end"
    _assert_monotonic(all_events)


async def test_last_event_id_replays_the_missed_events(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, **SLOW_POLL), pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        (lease,) = await store.claim("w1")
        await store.retry_or_fail(lease, ProviderUnavailable("503"))
        async with pool.acquire() as conn:  # make the retry due now
            await conn.execute(
                "UPDATE extraction_jobs SET available_at = now() WHERE id = $1", job_id
            )
        (lease,) = await store.claim("w2")
        await store.succeed(lease, result={})
        seqs = await _seqs(pool, job_id)
        headers = {**tk.headers, "Last-Event-ID": str(seqs[1])}
        async with c.stream("GET", f"/v1/extraction-jobs/{job_id}/events", headers=headers) as r:
            replayed = await read_sse(iter_sse(r))
    states = [e for e in replayed if e.event == "state"]
    assert [e.data["state"] for e in states] == ["RETRY_SCHEDULED", "RUNNING", "SUCCEEDED"]
    assert [int(e.id or 0) for e in states] == seqs[2:]
    assert not any(e.data.get("snapshot") for e in states)
    assert replayed[-1].event == "end"


async def test_resuming_at_or_after_the_final_event_ends_at_once(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, **SLOW_POLL), pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        (lease,) = await store.claim("w1")
        await store.succeed(lease, result={})
        final = (await _seqs(pool, job_id))[-1]
        resumed: dict[int, list[SseEvent]] = {}
        for cursor in (final, final + 1000):
            headers = {**tk.headers, "Last-Event-ID": str(cursor)}
            url = f"/v1/extraction-jobs/{job_id}/events"
            async with c.stream("GET", url, headers=headers) as r:
                events = iter_sse(r)
                # The poll is 60 s: only an immediate end passes this bound.
                resumed[cursor] = await read_sse(events, timeout=5)
                assert await anext(events, None) is None  # and the server closed it
    for cursor, events in resumed.items():
        assert [e.event for e in events] == ["end"], (cursor, events)
        assert int(events[0].id or 0) == cursor


async def test_a_gap_beyond_the_replay_window_gets_reset_and_snapshot(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, sse_replay_limit=1, **SLOW_POLL), pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        (lease,) = await store.claim("w1")
        await store.succeed(lease, result={})
        seqs = await _seqs(pool, job_id)
        headers = {**tk.headers, "Last-Event-ID": str(seqs[0])}
        async with c.stream("GET", f"/v1/extraction-jobs/{job_id}/events", headers=headers) as r:
            events = await read_sse(iter_sse(r))
    assert [e.event for e in events] == ["reset", "state", "end"]
    assert events[1].data == {**events[1].data, "state": "SUCCEEDED", "snapshot": True}
    assert int(events[1].id or 0) == seqs[-1]


async def test_tenant_stream_shows_only_own_jobs_without_gaps(pool: asyncpg.Pool, dsn: str) -> None:
    a = await tenant_with_key(pool)
    b = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, **SLOW_POLL), pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        waiting = await _accept(c, a)  # in the snapshot
        async with c.stream("GET", "/v1/events", headers=a.headers) as r:
            events = iter_sse(r)
            snapshot = await read_sse(events, until="snapshot")
            b_job = await _accept(c, b)
            mine = [await _accept(c, a) for _ in range(12)]

            async def drive() -> None:
                # Claims and completions of many jobs commit concurrently.
                while leases := await store.claim(f"w-{uuid.uuid4().hex[:4]}", limit=2):
                    await asyncio.gather(*(store.succeed(lz, result={}) for lz in leases))

            await asyncio.gather(*(drive() for _ in range(4)))
            live: list[SseEvent] = []
            done: set[str] = set()
            want = {str(j) for j in [waiting, *mine]}
            async with asyncio.timeout(20):
                async for ev in events:
                    live.append(ev)
                    if ev.event == "state" and ev.data["state"] == "SUCCEEDED":
                        done.add(ev.data["job_id"])
                    if done >= want:
                        break
    assert [e.data["job_id"] for e in snapshot if e.event == "state"] == [str(waiting)]
    assert snapshot[-1].event == "snapshot"
    assert str(b_job) not in str([e.data for e in snapshot + live])
    per_job: dict[str, list[str]] = defaultdict(list)
    for e in live:
        per_job[e.data["job_id"]].append(e.data["state"])
    for job in mine:  # every transition of every job, in order, none missed
        assert per_job[str(job)] == ["READY", "RUNNING", "SUCCEEDED"], per_job[str(job)]
    assert per_job[str(waiting)] == ["RUNNING", "SUCCEEDED"]
    _assert_monotonic(snapshot + live)


async def test_revoking_the_key_ends_the_stream(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    settings = settings_for(dsn, sse_key_recheck_seconds=0.2, sse_poll_seconds=0.5)
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        async with c.stream("GET", f"/v1/extraction-jobs/{job_id}/events", headers=tk.headers) as r:
            events = iter_sse(r)
            first = await anext(events)
            async with pool.acquire() as conn:
                await conn.execute(
                    "UPDATE api_keys SET revoked_at = now() WHERE id = $1", tk.key_id
                )
            rest = await read_sse(events, until="revoked", timeout=5)
            assert await anext(events, None) is None  # the server closed the stream
    assert first.data["state"] == "READY"
    assert rest[-1].event == "revoked"


async def test_a_stream_past_its_max_age_says_reconnect_and_resuming_misses_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    settings = settings_for(dsn, sse_max_stream_seconds=1.0, sse_poll_seconds=0.2)
    app = create_app(settings, pool=pool)
    store = JobStore(pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        async with c.stream("GET", "/v1/events", headers=tk.headers) as r:
            events = iter_sse(r)
            first = await read_sse(events, until="reconnect", timeout=5)
            assert await anext(events, None) is None  # the server closed the stream
        reconnect = first[-1]
        assert reconnect.data == {"reason": "max_stream_age"} and reconnect.id is not None
        (lease,) = await store.claim("w1")  # changes while the client is away
        await store.succeed(lease, result={})
        headers = {**tk.headers, "Last-Event-ID": reconnect.id}
        async with c.stream("GET", "/v1/events", headers=headers) as r:
            resumed = await read_sse(iter_sse(r), until="reconnect", timeout=5)
    assert [e.data["state"] for e in first if e.event == "state"] == ["READY"]
    states = [(e.data["job_id"], e.data["state"]) for e in resumed if e.event == "state"]
    assert states == [(str(job_id), "RUNNING"), (str(job_id), "SUCCEEDED")]
    _assert_monotonic(first + resumed)


async def test_foreign_or_unknown_job_stream_is_404_and_bad_cursor_means_snapshot(
    pool: asyncpg.Pool, dsn: str
) -> None:
    a = await tenant_with_key(pool)
    b = await tenant_with_key(pool)
    app = create_app(settings_for(dsn, **SLOW_POLL), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_b = await _accept(c, b)
        job_a = await _accept(c, a)
        foreign = await c.get(f"/v1/extraction-jobs/{job_b}/events", headers=a.headers)
        headers = {**a.headers, "Last-Event-ID": "not-a-number"}
        async with c.stream("GET", f"/v1/extraction-jobs/{job_a}/events", headers=headers) as r:
            first = await anext(iter_sse(r))
    assert foreign.status_code == 404
    assert foreign.headers["content-type"] == "application/problem+json"
    assert first.data["snapshot"] is True and first.data["state"] == "READY"


def test_cursor_never_lets_a_job_move_backwards() -> None:
    cursor = StreamCursor()
    job = uuid.uuid4()
    assert cursor.admit(job, 3, seq=10)
    assert not cursor.admit(job, 2, seq=12)  # a late, older version is dropped
    assert not cursor.admit(job, 3, seq=13)  # and so is a duplicate
    assert cursor.admit(job, 4, seq=9)  # a newer version committed late is sent
    assert cursor.seq == 13  # the SSE id never decreases


async def test_stream_ends_with_unavailable_when_the_database_goes_away(dsn: str) -> None:
    setup = await create_pool(dsn, min_size=1, max_size=2)
    tk = await tenant_with_key(setup)
    await setup.close()
    own = await create_pool(dsn, min_size=1, max_size=4)  # the app's pool, killed below
    app = create_app(settings_for(dsn, sse_poll_seconds=0.2, sse_keepalive_seconds=60), pool=own)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job_id = await _accept(c, tk)
        async with c.stream("GET", f"/v1/extraction-jobs/{job_id}/events", headers=tk.headers) as r:
            events = iter_sse(r)
            first = await anext(events)
            own.terminate()
            rest = await read_sse(events, until="unavailable", timeout=10)
            assert await anext(events, None) is None
    assert first.data["state"] == "READY"
    assert rest[-1].event == "unavailable"
