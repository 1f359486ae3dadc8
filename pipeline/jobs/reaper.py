"""The reaper as a supervised service: expired leases and passed deadlines, on a timer.

It only calls :meth:`pipeline.jobs.store.JobStore.reap`, whose writes are conditional
on the lease having expired, so any number of reapers may run at once.
"""

from __future__ import annotations

import logging

from pipeline.jobs.records import ReapReport
from pipeline.jobs.store import JobStore
from pipeline.periodic import PeriodicPass

log = logging.getLogger(__name__)


class Reaper(PeriodicPass):
    """start()/stop() around a periodic :meth:`run_once`."""

    pass_name = "reaper pass"

    def __init__(self, store: JobStore, *, interval_seconds: float = 5.0, batch: int = 100) -> None:
        if interval_seconds <= 0 or batch <= 0:
            raise ValueError("interval_seconds and batch must be positive")
        self.store = store
        self.interval_seconds = interval_seconds
        self.batch = batch
        self.total = ReapReport()

    async def run_once(self) -> ReapReport:
        """Reap until a batch comes back short; return what this call moved."""
        report = ReapReport()
        while True:
            part = await self.store.reap(limit=self.batch)
            report.rescheduled += part.rescheduled
            report.failed += part.failed
            report.deadline_failed += part.deadline_failed
            if part.total < self.batch:
                break
        self.total.rescheduled += report.rescheduled
        self.total.failed += report.failed
        self.total.deadline_failed += report.deadline_failed
        # The backlog and review SLIs, sampled on the reaper's beat (one query each).
        async with self.store.pool.acquire() as conn:
            await self.store.metrics.sample(conn, self.store.clock.now())
        return report

    def pass_interval(self) -> float:
        return self.interval_seconds
