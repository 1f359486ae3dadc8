"""Spend reconciliation: reported usage into ``tenant_spend``, settled reservations out.

A pass (:meth:`SpendReconciler.run_once`) charges every ended attempt not yet
charged at the configured token price (``reconciled`` goes up), then releases
the reservations of settled jobs (``reserved`` goes down). Both are single
statements that write their ledger row and the tenant's counter together, and
both are idempotent: a charge is keyed by (job, fence), a release is
conditional on ``released_at IS NULL``. Several passes at once (two maintenance
actors during an upgrade) therefore never count anything twice. The
maintenance actor runs it periodically; see :mod:`pipeline.spend` for the
invariants it keeps. After each pass it samples the spend gauges
(:mod:`pipeline.tenants.spend_metrics`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.periodic import PeriodicPass
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants.spend_metrics import SpendMetrics, default_spend_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileReport:
    """What one pass did: attempts charged and reservations released."""

    charged: int
    released: int


class SpendReconciler(PeriodicPass):
    """start()/stop() around a periodic :meth:`run_once`."""

    pass_name = "spend reconciliation pass"

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        interval_seconds: float = 5.0,
        batch: int = 500,
        clock: Clock | None = None,
        metrics: SpendMetrics | None = None,
    ) -> None:
        if interval_seconds <= 0 or batch <= 0:
            raise ValueError("interval and batch must be positive")
        self.pool = pool
        self.settings = settings
        self.interval_seconds = interval_seconds
        self.batch = batch
        self.clock = clock or DatabaseClock()
        self.metrics = metrics if metrics is not None else default_spend_metrics()

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
        # The spend gauges, sampled on the reconciler's beat (one grouped query).
        async with self.pool.acquire() as conn:
            await self.metrics.sample(conn, self.settings.spend_period, self.clock.now())
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

    def pass_interval(self) -> float:
        return self.interval_seconds
