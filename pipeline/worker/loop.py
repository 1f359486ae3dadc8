"""The loop that keeps a driver busy.

:class:`DriverLoop` claims as many leases as it has free slots (a semaphore
separate from any broker prefetch), waking on the scheduler's signal, and hands
each to :class:`~pipeline.worker.attempt.AttemptRunner`. Nothing here imports
Ray: ``cluster/drivers.py`` wraps it in an actor.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from pipeline.jobs import Lease
from pipeline.messaging import WorkSignal
from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import AttemptReport

log = logging.getLogger(__name__)


@dataclass
class DriverStats:
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


class DriverLoop:
    """Keeps up to ``concurrency`` attempts running; start()/stop()/run_once()."""

    def __init__(self, runner: AttemptRunner, *, signal: WorkSignal | None = None) -> None:
        self.runner = runner
        self.config = runner.config
        self.signal = signal or WorkSignal()
        self.stats = DriverStats()
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._tasks: set[asyncio.Task[AttemptReport]] = set()
        self._main: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run_once(self) -> int:
        """Claim what free slots allow and start those attempts; return how many."""
        free = self.config.concurrency - len(self._tasks)
        if free <= 0:
            return 0
        leases = await self.runner.store.claim(
            self.config.worker_id, limit=min(free, self.config.claim_batch)
        )
        for lease in leases:
            task = asyncio.create_task(self._run(lease), name=f"attempt-{lease.job_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.stats.claimed += len(leases)
        return len(leases)

    async def _run(self, lease: Lease) -> AttemptReport:
        async with self._slots:
            try:
                report = await self.runner.run(lease)
            except Exception:
                log.exception(
                    "attempt crashed for job %s; the reaper will recover it", lease.job_id
                )
                report = AttemptReport(lease.job_id, lease.fence, "crashed")
        self.stats.outcomes[report.outcome] = self.stats.outcomes.get(report.outcome, 0) + 1
        return report

    async def start(self) -> None:
        if self._main is not None:
            raise RuntimeError("driver loop already started")
        self._stopping.clear()
        self._main = asyncio.create_task(self._loop(), name=f"driver-{self.config.worker_id}")

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            token = self.signal.token()
            try:
                started = await self.run_once()
            except Exception:
                log.exception("claim failed; retrying")
                started = 0
            if started and len(self._tasks) < self.config.concurrency:
                continue
            waiters: set[asyncio.Future[Any]] = {
                asyncio.ensure_future(self.signal.wait(token, self.config.idle_poll_seconds)),
                asyncio.ensure_future(self._stopping.wait()),
            }
            if self._tasks:
                waiters.add(
                    asyncio.ensure_future(
                        asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
                    )
                )
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for p in pending:
                p.cancel()

    async def stop(self, *, grace_seconds: float = 30.0) -> None:
        """Stop claiming; let attempts finish within ``grace_seconds``, then cancel them.

        A cancelled attempt's lease simply expires: the reaper reschedules it with
        a new fence, so nothing is lost and nothing commits twice.
        """
        self._stopping.set()
        if self._main is not None:
            await self._main
            self._main = None
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending)
