"""Prometheus metrics of the broker path: outbox relay, inbox, DLQ and scheduler.

The spec's point is that these boundaries fail independently: a healthy, empty
queue can coexist with thousands of acknowledged jobs waiting in the inbox, and a
relay can be alive while one unroutable event ages in the outbox. So each
boundary has its own gauge, and the two alerts (an unroutable publish, an inbox
digest mismatch) are counters an alert rule can watch for any increase.

Every metric lives on the :class:`BrokerMetrics` instance's registry; tests build
one on their own ``CollectorRegistry`` so parallel tests never share counters.
Labels are bounded enums (outcome, via, store, source, queue), never job ids.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class BrokerMetrics:
    """All broker-path metrics, registered once on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        # ------------------------------------------------------------- outbox
        self.outbox_oldest_unpublished_seconds = Gauge(
            "fenceline_outbox_oldest_unpublished_seconds",
            "Age of the oldest outbox event not yet published (0 when none).",
            registry=r,
        )
        self.outbox_unpublished = Gauge(
            "fenceline_outbox_unpublished_events",
            "Outbox events not yet published.",
            registry=r,
        )
        self.outbox_published = Counter(
            "fenceline_outbox_published",
            "Outbox events marked published, by how (broker confirm or local).",
            ["via"],
            registry=r,
        )
        self.outbox_round_failures = Counter(
            "fenceline_outbox_round_failures",
            "Relay rounds that raised or overran their lease (retried), by error class.",
            ["error"],
            registry=r,
        )
        self.outbox_publish_failures = Counter(
            "fenceline_outbox_publish_failures",
            "Events left unpublished after a publish try, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.outbox_unroutable = Counter(
            "fenceline_outbox_unroutable",
            "ALERT: publishes the broker returned as unroutable (no binding).",
            registry=r,
        )
        self.outbox_publish_seconds = Histogram(
            "fenceline_outbox_publish_seconds",
            "Time from publishing a batch to its last confirm (or timeout).",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        # -------------------------------------------------------------- inbox
        self.inbox_messages = Counter(
            "fenceline_inbox_messages",
            "Deliveries handled by the ingress consumer, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.inbox_digest_mismatch = Counter(
            "fenceline_inbox_digest_mismatch",
            "ALERT: an event id arrived again with a different payload digest.",
            registry=r,
        )
        self.inbox_backlog = Gauge(
            "fenceline_inbox_backlog_jobs",
            "Runnable jobs acknowledged through the inbox and not yet claimed.",
            registry=r,
        )
        self.inbox_oldest_backlog_seconds = Gauge(
            "fenceline_inbox_oldest_backlog_seconds",
            "Age of the oldest inbox record whose job is still waiting to be claimed.",
            registry=r,
        )
        self.broker_lag_seconds = Histogram(
            "fenceline_broker_lag_seconds",
            "Relay publish to inbox commit, per delivery (relay and consumer clocks).",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.broker_queue_messages = Gauge(
            "fenceline_broker_queue_messages",
            "Messages ready in a broker queue (work or dead-letter).",
            ["queue"],
            registry=r,
        )
        # ---------------------------------------------------------------- dlq
        self.dlq_depth = Gauge(
            "fenceline_dlq_depth",
            "Dead letters: waiting in the broker DLQ, or archived and not replayed.",
            ["store"],
            registry=r,
        )
        self.dlq_archived = Counter(
            "fenceline_dlq_archived",
            "Dead letters archived from the DLQ, by source.",
            ["source"],
            registry=r,
        )
        self.dlq_replayed = Counter(
            "fenceline_dlq_replayed",
            "Dead letters replayed through the outbox.",
            registry=r,
        )
        # ---------------------------------------------------------- scheduler
        self.scheduler_wakeups = Counter(
            "fenceline_scheduler_wakeups",
            "Work signals raised, by source (notify or scan).",
            ["source"],
            registry=r,
        )
        self.scheduler_due_jobs = Gauge(
            "fenceline_scheduler_due_jobs",
            "Runnable jobs due now, as of the last scan.",
            registry=r,
        )


_default: BrokerMetrics | None = None


def default_metrics() -> BrokerMetrics:
    """The process-wide instance on Prometheus' default registry (created once)."""
    global _default
    if _default is None:
        _default = BrokerMetrics()
    return _default
