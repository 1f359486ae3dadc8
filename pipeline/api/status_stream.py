"""Live job status as Server-Sent Events (spec section 5).

Notifications say *that* a job changed; ``GET /v1/extraction-jobs/{id}`` stays
the authoritative state. The stream's source is the ``job_events`` audit table
that a trigger fills on every state change, and its cursor is ``job_events.seq``
(the SSE ``id``). Invariants:

* **Bounded replay, otherwise a fresh snapshot.** With ``Last-Event-ID`` the
  stream replays the events after that cursor, at most ``sse_replay_limit`` of
  them; a longer gap sends ``event: reset`` and a snapshot instead. Without it
  the stream starts from a snapshot of the current state.
* **A job stream always ends after the final state**, also when it is resumed
  with a cursor at or after the final event: nothing is replayed then, and
  ``end`` follows at once.
* **state_version never moves backwards** within a stream: an event is sent only
  if its ``state_version`` is above the last one sent for that job, and the SSE
  ``id`` is the highest cursor sent so far, so it never decreases either.
* **No missed commits.** Per job, events commit in ``seq`` order (the job row is
  locked by each change). Across jobs a transaction may commit a lower ``seq``
  after a higher one is visible, so the tenant-wide stream re-reads a small
  window below its cursor; the per-job version check drops the duplicates.
* **Access is re-checked.** The presented API key is authenticated again every
  ``sse_key_recheck_seconds``; a revoked key gets ``event: revoked`` and the
  stream ends.
* **Bounded lifetime.** A stream open for ``sse_max_stream_seconds`` sends
  ``event: reconnect`` with its cursor and ends; resuming with that
  ``Last-Event-ID`` misses nothing (replay), so long-lived clients move between
  replicas and a replica's per-client state stays bounded.
* **Fail closed.** If the database becomes unreachable mid-stream, the stream
  sends ``event: unavailable`` and ends; the client reconnects with its cursor.
* **Wake-ups, not polling loops.** One LISTEN connection per app
  (:class:`EventHub`) wakes the streams of the notified tenant; a periodic
  re-read (``sse_poll_seconds``) covers notifications lost while that
  connection was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from pipeline.api.problems import DATABASE_UNAVAILABLE
from pipeline.errors import KeyExpired
from pipeline.queries import q
from pipeline.service import LoopService
from pipeline.settings import Settings
from pipeline.states import FINAL, JobState
from pipeline.tenants import authenticate
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

CHANNEL = "fenceline_job_events"
#: Every ``event:`` name a stream sends (the OpenAPI document lists them).
SSE_EVENTS = ("state", "snapshot", "reset", "revoked", "unavailable", "reconnect", "end")
#: How far below its cursor the tenant-wide stream re-reads (in ``seq`` units),
#: to catch transactions that committed a lower ``seq`` after a higher one.
TENANT_LOOKBACK = 200


class _Waiter:
    def __init__(self, tenant_id: uuid.UUID, job_id: uuid.UUID | None) -> None:
        self.tenant_id = tenant_id
        self.job_id = job_id
        self.event = asyncio.Event()


class EventHub(LoopService):
    """One ``LISTEN fenceline_job_events`` connection fanned out to open streams."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self._waiters: dict[uuid.UUID, set[_Waiter]] = defaultdict(set)
        self._conn: asyncpg.Connection | None = None
        self._closing = False
        self._subscribing = asyncio.Lock()

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def start(self) -> None:
        """Start listening; keeps retrying in the background if the database is down."""
        self._closing = False
        self._launch(self._keep_listening(), "fenceline-event-hub")

    def health_name(self) -> str:
        """Each check of the connection is a pass; one that could not listen failed."""
        return "event hub"

    def health_details(self) -> dict[str, Any]:
        return {"listening": self.listening}

    async def stop(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._release()
        for waiters in self._waiters.values():
            for w in waiters:
                w.event.set()

    async def _keep_listening(self) -> None:
        while not self._closing:
            await self.run_once()
            await asyncio.sleep(self.settings.sse_poll_seconds)

    async def run_once(self) -> bool:
        """Listen now unless already listening; whether the hub listens afterwards."""
        async with self._subscribing:  # the loop and a caller never both subscribe
            if not self.listening:
                await self._release()
                try:
                    conn = await self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds)
                    await conn.add_listener(CHANNEL, self._on_notify)
                    self._conn = conn
                    self._wake_all()  # anything may have changed while we were deaf
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    self.progress.failed(exc)
                    log.warning("event hub cannot listen yet: %s", exc)
                    return False
            self.progress.succeeded()
            return True

    async def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(Exception):
            if not conn.is_closed():
                await conn.remove_listener(CHANNEL, self._on_notify)
        with contextlib.suppress(Exception):
            await self.pool.release(conn)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            data = json.loads(payload)
            tenant_id = uuid.UUID(data["tenant_id"])
            job_id = uuid.UUID(data["job_id"])
        except (ValueError, KeyError, TypeError):
            return
        for w in self._waiters.get(tenant_id, ()):
            if w.job_id is None or w.job_id == job_id:
                w.event.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for w in waiters:
                w.event.set()

    @contextlib.contextmanager
    def subscribe(self, tenant_id: uuid.UUID, job_id: uuid.UUID | None) -> Iterator[_Waiter]:
        waiter = _Waiter(tenant_id, job_id)
        self._waiters[tenant_id].add(waiter)
        try:
            yield waiter
        finally:
            self._waiters[tenant_id].discard(waiter)
            if not self._waiters[tenant_id]:
                del self._waiters[tenant_id]


@dataclass
class StreamCursor:
    """What one stream has sent: its cursor and the newest state_version per job."""

    seq: int = 0
    versions: dict[uuid.UUID, tuple[int, int]] = field(default_factory=dict)

    def admit(self, job_id: uuid.UUID, state_version: int, seq: int) -> bool:
        """True if an event may be sent: it moves its job forward."""
        known = self.versions.get(job_id)
        if known is not None and known[0] >= state_version:
            self.seq = max(self.seq, seq)
            return False
        self.versions[job_id] = (state_version, seq)
        self.seq = max(self.seq, seq)
        return True

    def prune(self, below: int) -> None:
        """Forget jobs whose newest event is below the re-read window."""
        for job_id in [j for j, (_, s) in self.versions.items() if s < below]:
            del self.versions[job_id]


def frame(event: str, data: dict[str, Any], cursor: int | None) -> str:
    """One SSE frame."""
    lines = []
    if cursor is not None:
        lines.append(f"id: {cursor}")
    lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), default=str))
    return "\n".join(lines) + "\n\n"


_EVENT_ID = re.compile(r"[0-9]{1,18}")


def parse_last_event_id(value: str | None) -> int | None:
    """A valid cursor, or None (an unusable cursor means a fresh snapshot).

    ASCII digits only: ``str.isdigit`` also admits superscripts and other scripts'
    digits (``²``, ``٣``), which ``int`` then refuses or reads as another number.
    """
    if value is None or not _EVENT_ID.fullmatch(value.strip()):
        return None
    return int(value.strip())


class StatusStream:
    """One SSE stream for a tenant, optionally for one job."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        hub: EventHub,
        settings: Settings,
        *,
        tenant_id: uuid.UUID,
        api_key: str | None = None,
        job_id: uuid.UUID | None = None,
        last_event_id: int | None = None,
        key_valid: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """``api_key`` (a Bearer caller) or ``key_valid`` (a console session, which
        holds no key) is how the stream re-checks that its caller was not revoked."""
        if api_key is None and key_valid is None:
            raise ValueError("a stream needs api_key or key_valid to re-check its caller")
        self.pool = pool
        self.hub = hub
        self.settings = settings
        self.tenant_id = tenant_id
        self.api_key = api_key
        self.key_valid = key_valid
        self.job_id = job_id
        self.last_event_id = last_event_id
        self.cursor = StreamCursor()
        self._final = False

    def _acquire(self) -> Any:
        return self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds)

    def _emit(self, row: Any, *, snapshot: bool = False) -> str | None:
        if not self.cursor.admit(row["job_id"], row["state_version"], row["seq"]):
            return None
        state = row["to_state"]
        if self.job_id is not None and JobState(state) in FINAL:
            self._final = True
        data = {
            "job_id": str(row["job_id"]),
            "state": state,
            "from_state": row["from_state"],
            "state_version": row["state_version"],
            "at": row["created_at"].isoformat(),
        }
        if snapshot:
            data["snapshot"] = True
        return frame("state", data, self.cursor.seq)

    async def _fetch(self, after: int, limit: int) -> list[Any]:
        async with self._acquire() as conn:
            if self.job_id is not None:
                return list(
                    await conn.fetch(
                        q("job_event_list_for_tenant_job_after"),
                        self.job_id,
                        self.tenant_id,
                        after,
                        limit,
                    )
                )
            return list(
                await conn.fetch(q("job_event_list_for_tenant_after"), self.tenant_id, after, limit)
            )

    async def _snapshot(self) -> list[str]:
        async with self._acquire() as conn:
            if self.job_id is not None:
                row = await conn.fetchrow(
                    q("job_event_get_latest_for_tenant_job"), self.job_id, self.tenant_id
                )
                out = self._emit(row, snapshot=True) if row is not None else None
                return [out] if out else []
            cursor = int(await conn.fetchval(q("job_event_get_cursor_for_tenant"), self.tenant_id))
            jobs = await conn.fetch(
                q("job_list_unsettled_for_tenant"), self.tenant_id, self.settings.sse_replay_limit
            )
        self.cursor.seq = max(self.cursor.seq, cursor)
        frames = []
        for j in jobs:
            row = {
                "job_id": j["job_id"],
                "state_version": j["state_version"],
                "seq": cursor,
                "to_state": j["state"],
                "from_state": None,
                "created_at": j["updated_at"],
            }
            out = self._emit(row, snapshot=True)
            if out:
                frames.append(out)
        frames.append(
            frame(
                "snapshot",
                {"jobs": len(jobs), "truncated": len(jobs) >= self.settings.sse_replay_limit},
                self.cursor.seq,
            )
        )
        return frames

    async def _start(self) -> list[str]:
        if self.last_event_id is None:
            return await self._snapshot()
        limit = self.settings.sse_replay_limit
        rows = await self._fetch(self.last_event_id, limit + 1)
        if len(rows) > limit:
            reset = frame("reset", {"reason": "replay_window_exceeded"}, None)
            return [reset, *await self._snapshot()]
        self.cursor.seq = self.last_event_id
        frames = [f for f in (self._emit(r) for r in rows) if f]
        if self.job_id is not None and not self._final:
            self._final = await self._settled_before_cursor()
        return frames

    async def _settled_before_cursor(self) -> bool:
        """True if the job's final event is at or below the resumed cursor.

        A client resuming after the final event has nothing left to replay and
        no later event will ever come, so the stream must end now rather than
        wait forever.
        """
        async with self._acquire() as conn:
            row = await conn.fetchrow(
                q("job_event_get_latest_for_tenant_job"), self.job_id, self.tenant_id
            )
        return (
            row is not None and row["seq"] <= self.cursor.seq and JobState(row["to_state"]) in FINAL
        )

    async def _poll(self) -> list[str]:
        lookback = TENANT_LOOKBACK if self.job_id is None else 0
        after = max(0, self.cursor.seq - lookback)
        rows = await self._fetch(after, self.settings.sse_replay_limit + lookback)
        frames = [f for f in (self._emit(r) for r in rows) if f]
        if lookback:
            self.cursor.prune(self.cursor.seq - lookback)
        return frames

    async def _key_valid(self) -> bool:
        if self.key_valid is not None:
            return await self.key_valid()
        assert self.api_key is not None
        try:
            async with self._acquire() as conn:
                principal = await authenticate(conn, self.api_key)
        except KeyExpired:
            return False  # an open stream ends when its key expires, as when it is revoked
        return principal is not None and principal.tenant_id == self.tenant_id

    async def events(self) -> AsyncIterator[str]:
        """The SSE body: replay or snapshot, then live events until final or revoked."""
        s = self.settings
        with self.hub.subscribe(self.tenant_id, self.job_id) as waiter:
            yield "retry: 2000\n\n"
            for f in await self._start():
                yield f
            opened = last_check = last_sent = time.monotonic()
            while not self._final:
                now = time.monotonic()
                timeout = min(
                    s.sse_poll_seconds,
                    max(0.0, last_check + s.sse_key_recheck_seconds - now),
                    max(0.0, last_sent + s.sse_keepalive_seconds - now),
                    max(0.0, opened + s.sse_max_stream_seconds - now),
                )
                with contextlib.suppress(TimeoutError):
                    await wait_within(waiter.event.wait(), timeout)
                waiter.event.clear()
                now = time.monotonic()
                if now - opened >= s.sse_max_stream_seconds:
                    yield frame("reconnect", {"reason": "max_stream_age"}, self.cursor.seq)
                    return
                try:
                    if now - last_check >= s.sse_key_recheck_seconds:
                        last_check = now
                        if not await self._key_valid():
                            yield frame("revoked", {"reason": "api_key_revoked"}, None)
                            return
                    frames = await self._poll()
                except DATABASE_UNAVAILABLE:
                    # Fail closed: without the database the key cannot be re-checked.
                    # The client reconnects with Last-Event-ID and misses nothing.
                    yield frame("unavailable", {"reason": "database_unavailable"}, None)
                    return
                sent = False
                for f in frames:
                    sent = True
                    yield f
                if sent:
                    last_sent = time.monotonic()
                elif time.monotonic() - last_sent >= s.sse_keepalive_seconds:
                    last_sent = time.monotonic()
                    yield ": keepalive\n\n"
            yield frame("end", {"reason": "final_state"}, self.cursor.seq)
