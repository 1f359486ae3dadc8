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

from pipeline.extraction import prepare_call, warm_rules, warm_schemas
from pipeline.jobs import Lease
from pipeline.messaging import WorkSignal
from pipeline.service import LoopService
from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import AttemptReport

log = logging.getLogger(__name__)


@dataclass
class DriverStats:
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


@dataclass
class DrainReport:
    """What :meth:`DriverLoop.stop` did with the attempts it found running."""

    #: Ended on their own within the grace period (settled, retried or lost).
    finished: int = 0
    #: Still running at the end of the grace: cancelled and their leases given back.
    released: int = 0
    #: Cancelled, but the release matched no row: the job had already settled or
    #: moved on under another fence (nothing left to give back).
    already_settled: int = 0
    #: Cancelled and the release itself failed (database down): those leases expire
    #: and the reaper recovers them, the only case a drain leaves to it.
    unreleased: int = 0


class DriverLoop(LoopService):
    """Keeps up to ``concurrency`` attempts running; start()/stop()/run_once()."""

    def __init__(self, runner: AttemptRunner, *, signal: WorkSignal | None = None) -> None:
        self.runner = runner
        self.config = runner.config
        self.signal = signal or WorkSignal()
        self.stats = DriverStats()
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._tasks: set[asyncio.Task[AttemptReport]] = set()
        self._leases: dict[asyncio.Task[AttemptReport], Lease] = {}
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
            self._leases[task] = lease
            task.add_done_callback(self._forget)
        self.stats.claimed += len(leases)
        return len(leases)

    def _forget(self, task: asyncio.Task[AttemptReport]) -> None:
        self._tasks.discard(task)
        self._leases.pop(task, None)

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

    def _warm(self) -> None:
        """Pay once, at start, what the first attempt would pay in its own time.

        Building a call fills process-wide caches (the CLDR month names of every
        European locale for the date candidates, the answer schema's parts): about
        a third of a second on a 2-core machine, seen in the driver's profile
        (docs/history/benchmarks-passes.md). The e-invoice XSDs and EN 16931's rules are compiled
        too.
        Nothing is written.
        """
        config = self.runner.config
        prepare_call(
            "INVOICE 1 of 1 January 2024, total 10.00 EUR",
            contract=config.contract,
            include_schema=config.include_schema_in_prompt,
        )
        warm_schemas()  # the e-invoice XSDs: about 0.3 s, UBL's most of it
        warm_rules()  # EN 16931's rules, UBL and CII: about 0.5 s together

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("driver loop already started")
        self._stopping.clear()
        await asyncio.to_thread(self._warm)
        self._launch(self._loop(), f"driver-{self.config.worker_id}")

    def health_name(self) -> str:
        """Each claim round is a pass; attempts in flight are the driver's work, not its loop's."""
        return f"driver {self.config.worker_id}"

    def health_details(self) -> dict[str, Any]:
        return {"in_flight": self.in_flight}

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            token = self.signal.token()
            try:
                started = await self.run_once()
            except Exception as exc:
                self.progress.failed(exc)
                log.exception("claim failed; retrying")
                started = 0
            else:
                self.progress.succeeded()
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

    async def stop(self, *, grace_seconds: float = 30.0) -> DrainReport:
        """Drain: stop claiming, let attempts finish within ``grace_seconds``, then
        cancel the rest and give their leases back.

        A given-back lease (:meth:`JobStore.release`) is RETRY_SCHEDULED due now
        under fence+1, so another driver claims it at once instead of waiting for
        the lease to expire and the reaper to find it; the conditional release
        changes nothing for an attempt that settled while being cancelled.
        """
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        report = DrainReport()
        if not self._tasks:
            return report
        running = set(self._tasks)
        leases = dict(self._leases)
        _, pending = await asyncio.wait(running, timeout=grace_seconds)
        report.finished = len(running) - len(pending)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        for t in pending:
            lease = leases[t]
            try:
                released = await self.runner.store.release(lease)
            except Exception:
                log.exception("could not release job %s; its lease will expire", lease.job_id)
                report.unreleased += 1
                continue
            if released:
                report.released += 1
            else:
                report.already_settled += 1
        log.info("driver %s drained: %s", self.config.worker_id, report)
        return report
