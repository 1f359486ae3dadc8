"""The delivery dispatcher's Prometheus series."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class DeliveryMetrics:
    """Delivery series on a registry of their own (bounded labels, no ids)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.attempts = Counter(
            "fenceline_delivery_attempts",
            "Delivery attempts by outcome",
            ["outcome"],
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
