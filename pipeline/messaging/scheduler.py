"""The durable scheduler: wakes drivers when runnable work may exist.

"A durable scheduler scans eligible jobs even without another notification"
(spec, section 2). PostgreSQL is the only source of truth about runnable jobs;
everything here is a *hint* that tells idle drivers to try a claim:

* ``LISTEN fenceline_runnable`` on a dedicated connection: the job trigger
  notifies when a job becomes READY or RETRY_SCHEDULED, and the inbox notifies
  when it commits an event for a runnable job.
* A periodic scan of due jobs, which also catches what notifications cannot:
  a RETRY_SCHEDULED job whose ``available_at`` passes (no row changes then),
  notifications lost while the LISTEN connection was down, and a job the broker
  path acknowledged whose wake-up nobody heard. So an acknowledged job is never
  stranded, with or without a broker.

Drivers use :class:`WorkSignal` without a poll loop of their own::

    token = signal.token()
    leases = await store.claim(worker_id)
    if not leases:
        await signal.wait(token)   # returns at once if a wake-up came since token()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict, Field

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import connect
from pipeline.messaging.metrics import BrokerMetrics, default_metrics
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.service import LoopService, ServiceHealth
from pipeline.settings import Settings
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

RUNNABLE_CHANNEL = "fenceline_runnable"

#: Errors after which a database connection is retried rather than a bug reported.
TRANSIENT_DB_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.TooManyConnectionsError,
    # asyncpg 0.32 reports a connection whose backend was terminated
    # (pg_terminate_backend) while it sat idle in a pool as "cannot switch to
    # state N; another operation (2) is in progress" on its next query; the pool
    # discards that connection on release.
    asyncpg.InternalClientError,
)


class WorkSignal:
    """An edge-triggered wake-up for idle drivers, with no lost-wake-up window.

    A driver takes :meth:`token` *before* it tries to claim; :meth:`wait` returns
    immediately if any :meth:`notify` happened since, so a wake-up that arrives
    between an empty claim and the wait is never missed. Loop-local: call it from
    the event loop thread.
    """

    def __init__(self) -> None:
        self._generation = 0
        self._event = asyncio.Event()

    def token(self) -> int:
        return self._generation

    def notify(self) -> None:
        self._generation += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, token: int | None = None, timeout: float | None = None) -> bool:
        """Wait for a wake-up newer than ``token``; False if ``timeout`` passed first."""
        if token is not None and token != self._generation:
            return True
        event = self._event
        try:
            await wait_within(event.wait(), timeout)
        except TimeoutError:
            return False
        return True


class NotificationListener:
    """LISTEN on a dedicated connection that comes back after it is lost.

    ``callback(payload)`` runs for every notification, and once with
    ``payload=None`` after each (re)connect, because notifications sent while the
    connection was down are gone and the caller should rescan.
    """

    def __init__(
        self,
        dsn: str,
        channel: str,
        callback: Callable[[str | None], None],
        *,
        reconnect_seconds: float = 1.0,
    ) -> None:
        self.dsn = dsn
        self.channel = channel
        self.callback = callback
        self.reconnect_seconds = reconnect_seconds
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._lost = asyncio.Event()
        #: Set while LISTEN is active (tests wait on it before sending NOTIFYs).
        self.listening = asyncio.Event()
        #: Successful (re)connects so far.
        self.connections = 0
        self._connected = asyncio.Condition()
        self._reconnecting = asyncio.Lock()

    @property
    def live(self) -> bool:
        """LISTEN is active right now: subscribed, and the connection neither lost nor
        closed. False from the moment the connection is seen to close, before the
        reconnect loop has run; a reader that must not miss a notification
        (pipeline.api.key_cache) checks this, not ``listening``."""
        conn = self._conn
        return (
            self.listening.is_set()
            and not self._lost.is_set()
            and conn is not None
            and not conn.is_closed()
        )

    async def start(self) -> None:
        self._stopping.clear()
        await self._connect()
        self._task = asyncio.create_task(self._keep(), name=f"listen-{self.channel}")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        conn, self._conn = self._conn, None
        self.listening.clear()
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(*TRANSIENT_DB_ERRORS):
                await conn.close(timeout=2)

    async def _connect(self) -> None:
        try:
            conn = await connect(self.dsn)
            await conn.add_listener(self.channel, self._on_notify)
        except TRANSIENT_DB_ERRORS as exc:
            log.warning("LISTEN %s: cannot connect (%s); retrying", self.channel, exc)
            self._lost.set()
            return
        conn.add_termination_listener(lambda _c: self._lost.set())
        self._conn = conn
        self._lost.clear()
        self.listening.set()
        async with self._connected:
            self.connections += 1
            self._connected.notify_all()
        self.callback(None)

    async def run_once(self) -> bool:
        """Reconnect now if LISTEN is not live (the loop does so after
        ``reconnect_seconds``); whether it is live afterwards."""
        await self._reconnect()
        return self.live

    def health(self) -> ServiceHealth:
        """Running while the reconnect task lives; ``last_error`` while LISTEN is down.

        Each (re)connect is a pass; a listener has no stall bound (it waits, by
        design, for as long as no connection is lost).
        """
        running = self._task is not None and not self._task.done()
        return ServiceHealth(
            name=f"listen {self.channel}",
            running=running,
            stalled=not running,
            passes=self.connections,
            last_error="" if self.live or not running else "LISTEN connection lost",
            details={"live": self.live},
        )

    async def wait_connections(self, n: int) -> None:
        """Wait until the listener has connected ``n`` times (initial + reconnects)."""
        async with self._connected:
            await self._connected.wait_for(lambda: self.connections >= n)

    async def _keep(self) -> None:
        while not self._stopping.is_set():
            await self._lost.wait()
            self.listening.clear()
            await asyncio.sleep(self.reconnect_seconds)
            await self._reconnect()

    async def _reconnect(self) -> None:
        """Connect if the connection is lost; one at a time (the loop and run_once)."""
        async with self._reconnecting:
            if self._lost.is_set():
                await self._connect()

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.callback(payload)


class SchedulerConfig(BaseModel):
    """How often the scheduler scans even when nothing notifies."""

    model_config = ConfigDict(frozen=True)

    scan_interval_seconds: float = Field(2.0, gt=0)
    #: Shortest sleep before a RETRY_SCHEDULED job becomes due (bounds wake-up storms).
    min_sleep_seconds: float = Field(0.02, gt=0)
    #: At most one notification-triggered rescan per this many seconds.
    rescan_gap_seconds: float = Field(0.05, ge=0)
    listen: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> SchedulerConfig:
        return cls(scan_interval_seconds=settings.scan_interval_seconds)


def _seconds_or_none(value: Any) -> float | None:
    return float(value) if value is not None else None


@dataclass(frozen=True)
class ScanReport:
    due: int
    next_due_in_seconds: float | None
    inbox_backlog: int
    inbox_oldest_seconds: float


class Scheduler(LoopService):
    """Feeds a :class:`WorkSignal` from LISTEN/NOTIFY plus a periodic scan.

    Runs the same way with or without a broker: with RabbitMQ the inbox's
    notifications arrive sooner, and the scan still guarantees progress.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        signal: WorkSignal | None = None,
        *,
        config: SchedulerConfig | None = None,
        clock: Clock | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.signal = signal or WorkSignal()
        self.config = config or SchedulerConfig.from_settings(settings)
        self.clock = clock or DatabaseClock()
        self.metrics = metrics or default_metrics()
        self.listener = NotificationListener(
            settings.database_url, RUNNABLE_CHANNEL, self._on_notify
        )
        self._stopping = asyncio.Event()
        self._rescan = asyncio.Event()

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("scheduler already started")
        self._stopping.clear()
        if self.config.listen:
            await self.listener.start()
        self._launch(self._run(), "scheduler")

    def health_name(self) -> str:
        """Each scan is a pass; no stall bound (a scan is one bounded statement)."""
        return "scheduler"

    def health_details(self) -> dict[str, Any]:
        return {"listening": self.listener.live} if self.config.listen else {}

    async def stop(self) -> None:
        self._stopping.set()
        self._rescan.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.listener.stop()

    def _on_notify(self, payload: str | None) -> None:
        # Rescan either way: after a (re)connect notifications may have been
        # missed; after a job changed, the next due time may have moved closer.
        self._rescan.set()
        if payload is not None:
            self.metrics.scheduler_wakeups.labels(source="notify").inc()
            self.signal.notify()

    async def run_once(self) -> ScanReport:
        """Scan once; raise the signal if any runnable job is due now."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(q("job_scan_due"), self.clock.now())
        report = from_record(
            ScanReport,
            row,
            convert={
                "due": int,
                "next_due_in_seconds": _seconds_or_none,
                "inbox_backlog": int,
                "inbox_oldest_seconds": float,
            },
        )
        self.metrics.scheduler_due_jobs.set(report.due)
        self.metrics.inbox_backlog.set(report.inbox_backlog)
        self.metrics.inbox_oldest_backlog_seconds.set(report.inbox_oldest_seconds)
        if report.due:
            self.metrics.scheduler_wakeups.labels(source="scan").inc()
            self.signal.notify()
        return report

    async def _run(self) -> None:
        while not self._stopping.is_set():
            self._rescan.clear()
            sleep = self.config.scan_interval_seconds
            try:
                report = await self.run_once()
            except TRANSIENT_DB_ERRORS as exc:
                self.progress.failed(exc)
                log.warning("scheduler scan failed: %s", exc)
            except Exception as exc:  # any failed scan is retried; it never ends the loop
                # (the outbox relay died silently this way after a killed backend, issue 17)
                self.progress.failed(exc)
                log.exception("scheduler scan failed; retrying")
            else:
                self.progress.succeeded()
                if report.next_due_in_seconds is not None:
                    sleep = max(
                        self.config.min_sleep_seconds, min(sleep, report.next_due_in_seconds)
                    )
            try:
                await wait_within(self._rescan.wait(), sleep)
            except TimeoutError:
                continue
            # Woken by a notification: let a burst of them settle into one scan.
            await asyncio.sleep(self.config.rescan_gap_seconds)
