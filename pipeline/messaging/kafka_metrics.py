"""The Kafka ingress's Prometheus series (docs/kafka.md, "Metrics").

What an operator of ``fenceline kafka-ingress`` needs to see: records finished per
outcome, admission refusals of held records per reason, how much is read and not yet
behind a committed position, whether the window or a held record has paused
partitions, and per partition the committed position and the lag behind the
partition's end (sampled from the broker, not counted, so a restarted ingress shows
the group's lag at once). Labels are bounded: outcomes, refusal reasons and
partition numbers of the one topic an ingress reads, never record keys or ids.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class KafkaIngressMetrics:
    """Ingress series on a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.records = Counter(
            "fenceline_kafka_ingress_records",
            "Records finished, by outcome (accepted, replayed, refused, duplicate)",
            ["outcome"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "fenceline_kafka_ingress_admission_refusals",
            "Admission refusals of a held record, by reason (counted at each try)",
            ["reason"],
            registry=self.registry,
        )
        self.outstanding = Gauge(
            "fenceline_kafka_ingress_outstanding_records",
            "Records read and not yet behind a committed position",
            registry=self.registry,
        )
        self.window_paused = Gauge(
            "fenceline_kafka_ingress_window_paused",
            "1 while the window is full and every partition is paused",
            registry=self.registry,
        )
        self.held_partitions = Gauge(
            "fenceline_kafka_ingress_held_partitions",
            "Partitions paused because a record of theirs is held by admission",
            registry=self.registry,
        )
        self.committed = Gauge(
            "fenceline_kafka_ingress_committed_offset",
            "The consumer group's committed position, per partition",
            ["partition"],
            registry=self.registry,
        )
        self.lag = Gauge(
            "fenceline_kafka_ingress_lag_records",
            "Records between the committed position and the partition's end (sampled)",
            ["partition"],
            registry=self.registry,
        )
        self.commit_failures = Counter(
            "fenceline_kafka_ingress_commit_failures",
            "Offset commits the broker did not confirm (offered again next turn)",
            registry=self.registry,
        )

    def positions(self, samples: dict[int, tuple[int | None, int, int]]) -> None:
        """Set each partition's committed position and lag from one broker sample:
        ``{partition: (committed, start, end)}``, ``committed`` None where the group
        never committed (its lag then counts from the partition's start)."""
        for partition, (position, start, end) in samples.items():
            label = str(partition)
            if position is not None:
                self.committed.labels(label).set(position)
            self.lag.labels(label).set(max(0, end - (start if position is None else position)))
