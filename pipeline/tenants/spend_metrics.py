"""Tenant spend as Prometheus gauges: estimated, reserved and reconciled.

Admission budgets spend on estimates (each job reserves its estimated cost at
acceptance) and the reconciler replaces them with what the attempts reported
(:mod:`pipeline.spend`). Three gauges per tenant, for the current budget period,
make the gap visible: ``estimated`` (every reservation of the period, released
or not), ``reserved`` (held now for unsettled work) and ``reconciled`` (charged
from reported usage, and at their reservation for uncertain attempts that have
not reported). ``reconciled / estimated`` over a settled period is how
far the estimator is off; a tenant whose ``reserved + reconciled`` nears its
budget is about to be refused at acceptance.

Sampled after each reconciliation pass (:class:`~pipeline.tenants.SpendReconciler`,
in the maintenance actor), from the database, on the registry given (the
process default in services, which the actor bridges to Ray). Money as float
gauges is for dashboards only; the ledgers stay Decimal.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from pipeline.queries import q

#: The ``kind`` label of ``fenceline_tenant_spend``.
KINDS = ("estimated", "reserved", "reconciled")


class SpendMetrics:
    """``fenceline_tenant_spend{tenant,kind}`` on ``registry`` (the default when omitted)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.spend = Gauge(
            "fenceline_tenant_spend",
            "Tenant spend in the current budget period, in the price's currency: estimated "
            "(all reservations), reserved (held now) and reconciled (reported usage)",
            ["tenant", "kind"],
            registry=r,
        )
        self._tenants: set[str] = set()

    async def sample(
        self, conn: asyncpg.Connection, period: str, now: datetime | None = None
    ) -> dict[str, dict[str, float]]:
        """Read every tenant's spend of the period containing ``now``; returns what was set."""
        out: dict[str, dict[str, float]] = {}
        for row in await conn.fetch(q("spend_stats_by_tenant"), period, now):
            out[str(row["tenant_id"])] = {kind: float(row[kind]) for kind in KINDS}
        for tenant in self._tenants - out.keys():  # a new period began: nothing spent yet
            out[tenant] = dict.fromkeys(KINDS, 0.0)
        for tenant, values in out.items():
            for kind, amount in values.items():
                self.spend.labels(tenant, kind).set(amount)
        self._tenants |= out.keys()
        return out


_default: SpendMetrics | None = None


def default_spend_metrics() -> SpendMetrics:
    """The process-wide instance on Prometheus' default registry (created once)."""
    global _default
    if _default is None:
        _default = SpendMetrics()
    return _default
