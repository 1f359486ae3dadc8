"""Spend reconciliation: used tokens into ``tenant_spend``, settled reservations out.

A pass (:meth:`SpendReconciler.run_once`) charges every ended attempt not yet
charged at its model's prompt and completion prices (an attempt of unknown usage
that may have been billed at its reservation, marked estimated), replaces the
estimates whose attempt has since reported with that usage (``reconciled`` goes
up, or down by what the estimate overstated), then releases the reservations of
settled jobs (``reserved`` goes down). Each is a single statement that writes
its ledger row and the tenant's counter together, and each is idempotent: a
charge is keyed by (job, fence), a replacement is conditional on ``estimated``,
a release on ``released_at IS NULL``. Several passes at once (two maintenance
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
    """What one pass did: attempts charged (``estimated`` of them at their
    reservation), estimates replaced by reported usage, reservations released."""

    charged: int
    released: int
    estimated: int = 0
    replaced: int = 0


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
        charged = released = estimated = replaced = 0
        prices = self.settings.prices()
        names, prompt_prices, completion_prices = prices.sql_arrays()
        while True:
            row = await self._step(
                "spend_charge_attempts",
                self.settings.spend_period,
                self.batch,
                prices.default.prompt_per_1k,
                prices.default.completion_per_1k,
                names,
                prompt_prices,
                completion_prices,
                self.settings.output_reserve_tokens,
            )
            charged += int(row["charged"])
            estimated += int(row["estimated"])
            if row["charged"] < self.batch:
                break
        while True:
            row = await self._step(
                "spend_reconcile_estimates",
                self.batch,
                prices.default.prompt_per_1k,
                prices.default.completion_per_1k,
                names,
                prompt_prices,
                completion_prices,
                self.clock.now(),
            )
            replaced += int(row["replaced"])
            if row["replaced"] < self.batch:
                break
        while True:
            row = await self._step(
                "spend_reservation_release_settled", self.batch, self.clock.now()
            )
            released += int(row["released"])
            if row["released"] < self.batch:
                break
        if charged or released or replaced:
            log.info(
                "spend: charged %d attempts (%d at their reservation), replaced %d estimates, "
                "released %d reservations",
                charged,
                estimated,
                replaced,
                released,
            )
        # The spend gauges, sampled on the reconciler's beat (one grouped query).
        async with self.pool.acquire() as conn:
            await self.metrics.sample(conn, self.settings.spend_period, self.clock.now())
        return ReconcileReport(
            charged=charged, released=released, estimated=estimated, replaced=replaced
        )

    async def _step(self, query: str, *args: object) -> asyncpg.Record:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(q(query), *args)
            if row["applied"] != row["periods"]:
                # Rolls back the ledger rows with it: nothing half-counted.
                raise RuntimeError(
                    f"{query}: {row['periods']} tenant periods to adjust, {row['applied']} adjusted"
                )
        return row

    def pass_interval(self) -> float:
        return self.interval_seconds
