"""Spend reconciliation: reported usage into ``tenant_spend``, settled reservations out.

A pass (:meth:`SpendReconciler.run_once`) charges every ended attempt not yet
charged at the configured token price (``reconciled`` goes up), then releases
the reservations of settled jobs (``reserved`` goes down). Both are single
statements that write their ledger row and the tenant's counter together, and
both are idempotent: a charge is keyed by (job, fence), a release is
conditional on ``released_at IS NULL``. Several passes at once (two maintenance
actors during an upgrade) therefore never count anything twice. The
maintenance actor runs it periodically; see :mod:`pipeline.spend` for the
invariants it keeps.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.queries import q
from pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileReport:
    """What one pass did: attempts charged and reservations released."""

    charged: int
    released: int


class SpendReconciler:
    """start()/stop() around a periodic :meth:`run_once`."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        interval_seconds: float = 5.0,
        batch: int = 500,
        clock: Clock | None = None,
    ) -> None:
        if interval_seconds <= 0 or batch <= 0:
            raise ValueError("interval and batch must be positive")
        self.pool = pool
        self.settings = settings
        self.interval_seconds = interval_seconds
        self.batch = batch
        self.clock = clock or DatabaseClock()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def run_once(self) -> ReconcileReport:
        """Charge and release until nothing is left; charges first, so a settled
        job's usage is in ``reconciled`` no later than its reservation leaves."""
        charged = released = 0
        while True:
            n = await self._step(
                "spend_charge_attempts",
                "charged",
                self.settings.token_price_per_1k,
                self.settings.spend_period,
                self.batch,
            )
            charged += n
            if n < self.batch:
                break
        while True:
            n = await self._step(
                "spend_reservation_release_settled", "released", self.batch, self.clock.now()
            )
            released += n
            if n < self.batch:
                break
        if charged or released:
            log.info("spend: charged %d attempts, released %d reservations", charged, released)
        return ReconcileReport(charged=charged, released=released)

    async def _step(self, query: str, column: str, *args: object) -> int:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(q(query), *args)
            if row["applied"] != row["periods"]:
                # Rolls back the ledger rows with it: nothing half-counted.
                raise RuntimeError(
                    f"{query}: {row['periods']} tenant periods to adjust, {row['applied']} adjusted"
                )
        return int(row[column])

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("spend reconciler already started")
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="spend-reconciler")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.run_once()
            except Exception:  # a transient database error must not end the loop
                log.exception("spend reconciliation pass failed")
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval_seconds)
            except TimeoutError:
                continue
