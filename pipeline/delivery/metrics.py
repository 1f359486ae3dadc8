"""The delivery dispatcher's Prometheus series.

Outcomes are counted per attempt with the endpoint's state when it was claimed
(``closed``, or ``half_open`` for a breaker's probe), so a probe's failures are
told apart from a healthy endpoint's. Delivery lag is sampled from the
deliveries table (:meth:`DeliveryMetrics.sample`): how many deliveries are not
yet delivered nor given up and how old the oldest is since its job settled,
per endpoint state (``closed``, ``half_open``, ``open``, ``disabled``). Lag
behind an open or disabled endpoint is the tenant's ERP; lag behind a closed
one is ours (dispatcher down or saturated). Labels are bounded, never ids.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pipeline.queries import q

#: Every endpoint state the lag gauges report (zero when nothing waits there).
ENDPOINT_STATES = ("closed", "half_open", "open", "disabled")


class DeliveryMetrics:
    """Delivery series on a registry of their own (bounded labels, no ids)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.attempts = Counter(
            "fenceline_delivery_attempts",
            "Delivery attempts by outcome and the endpoint's state when claimed",
            ["outcome", "endpoint_state"],
            registry=self.registry,
        )
        self.attempt_seconds = Histogram(
            "fenceline_delivery_attempt_seconds",
            "Time from request start to the last response byte (or failure)",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.alerts = Counter(
            "fenceline_delivery_alerts",
            "Operational alerts: auth, egress_blocked, breaker_opened, endpoint_disabled",
            ["kind"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "fenceline_deliveries_pending",
            "Deliveries not yet delivered nor given up, by endpoint state",
            ["endpoint_state"],
            registry=self.registry,
        )
        self.oldest_pending_seconds = Gauge(
            "fenceline_delivery_oldest_pending_seconds",
            "Delivery lag: age of the oldest delivery not yet delivered nor given up "
            "(0 when none), by endpoint state",
            ["endpoint_state"],
            registry=self.registry,
        )

    async def sample(self, conn: asyncpg.Connection, now: datetime | None = None) -> dict[str, int]:
        """Read the lag gauges from the database; returns pending deliveries per state."""
        seen = {r["endpoint_state"]: r for r in await conn.fetch(q("delivery_lag_stats"), now)}
        out: dict[str, int] = {}
        for state in ENDPOINT_STATES:
            row = seen.get(state)
            out[state] = int(row["pending"]) if row is not None else 0
            self.pending.labels(state).set(out[state])
            self.oldest_pending_seconds.labels(state).set(
                float(row["oldest_seconds"]) if row is not None else 0.0
            )
        return out
