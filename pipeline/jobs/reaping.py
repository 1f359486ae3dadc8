"""Expired leases and passed deadlines: the reaper's writes.

Every write is conditional on the lease having expired (or the deadline passed)
under the row lock, so any number of reapers may run at once; the service that
calls it on a timer is :class:`~pipeline.jobs.reaper.Reaper`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.jobs.records import (
    Lease,
    ReapReport,
    Settled,
    settled_from_row,
)
from pipeline.jobs.settling import Settling
from pipeline.logs import bind_job
from pipeline.queries import q
from pipeline.tracing import SPAN_REAP, job_span, set_timeout

log = logging.getLogger(__name__)


class Reaping(Settling):
    """:meth:`reap`, on the job store."""

    async def reap(self, *, limit: int = 100) -> ReapReport:
        """Move expired leases on (fence+1) and fail waiting jobs past their deadline."""
        report = ReapReport()
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            for r in await conn.fetch(q("job_select_expired_leases"), now, limit):
                attrs = {
                    "fenceline.job_id": str(r["id"]),
                    "fenceline.tenant": str(r["tenant_id"]),
                    "fenceline.attempt": r["attempt"],
                    "fenceline.fence": r["fence"],
                    "fenceline.lost_owner": r["lease_owner"],
                }
                with (
                    job_span(SPAN_REAP, r["traceparent"], attrs) as span,
                    bind_job(job_id=r["id"], attempt=r["attempt"], fence=r["fence"]),
                ):
                    settled = await self._reap_expired(conn, r, now, report)
                    if settled is None:  # pragma: no cover - row locked above
                        continue
                    span.set_attribute("fenceline.state", settled.state.value)
                    span.set_attribute("fenceline.new_fence", settled.fence)
                    set_timeout(span, "lease", "lease expired before the owner committed")
                    log.warning("reaper: lease expired; job %s now", settled.state.value)
            for r in await conn.fetch(q("job_select_past_deadline"), now, limit):
                row = await conn.fetchrow(q("job_fail_if_waiting_past_deadline"), r["id"], now)
                if row is None:  # pragma: no cover - row locked above
                    continue
                report.deadline_failed.append(r["id"])
                settled = settled_from_row(row, reason="deadline_exceeded")
                await self._terminal_events(conn, settled, "deadline_exceeded", "deadline_exceeded")
                await self._run_hooks(conn, settled)
        if report.total:
            log.info(
                "reaper: %d rescheduled, %d failed, %d past deadline",
                len(report.rescheduled),
                len(report.failed),
                len(report.deadline_failed),
            )
        return report

    async def _reap_expired(
        self, conn: asyncpg.Connection, r: Any, now: datetime | None, report: ReapReport
    ) -> Settled | None:
        """Move one expired lease on (fence+1): re-queued, or terminal when out of attempts."""
        decision = self.policy.decide(
            now=r["now"],
            attempt=r["attempt"],
            deadline=r["deadline_at"],
            max_attempts=r["max_attempts"],
            rng=self.rng,
        )
        lost = Lease(
            job_id=r["id"],
            tenant_id=r["tenant_id"],
            attempt=r["attempt"],
            fence=r["fence"],
            lease_until=r["now"],
            deadline_at=r["deadline_at"],
            worker_id="reaper",
            document_id=None,
            object_version="",
            schema_version=1,
            model_policy="",
            priority=0,
            estimated_tokens=0,
            max_attempts=r["max_attempts"],
        )
        if decision.retry_at is not None:
            row = await conn.fetchrow(
                q("job_reschedule_if_expired"), r["id"], r["fence"], decision.retry_at, now
            )
            if row is None:  # pragma: no cover - row locked above
                return None
            report.rescheduled.append(r["id"])
            settled = settled_from_row(row, retry_at=decision.retry_at, reason="lease_expired")
        else:
            reason = decision.terminal_reason or "attempts_exhausted"
            row = await conn.fetchrow(q("job_fail_if_expired"), r["id"], r["fence"], reason, now)
            if row is None:  # pragma: no cover - row locked above
                return None
            report.failed.append(r["id"])
            settled = settled_from_row(row, reason=reason)
            await self._terminal_events(conn, settled, "lease_expired", reason)
        await self._close_attempt(
            conn,
            lost,
            "lease_expired",
            "lease_expired",
            "lease expired before the owner committed an outcome",
            None,
            uncertain=True,
        )
        await self._run_hooks(conn, settled)
        return settled
