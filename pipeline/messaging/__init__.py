"""Messaging: the outbox relay, the RabbitMQ adapter and publisher, the inbox and
consumer, the dead-letter queue and the scheduler's work signal.

This is the package's surface: other packages import these names from here,
never from a module inside. One exception: the Kafka ingress is imported as
``pipeline.messaging.kafka_ingress`` by the command that runs it, so nothing else
pays for loading librdkafka.
"""

from pipeline.messaging.broker import BrokerConfig, declare_topology
from pipeline.messaging.consumer import Delivery, Disposition, Settlement
from pipeline.messaging.dlq import DeadLetterArchiver
from pipeline.messaging.dlq_retention import DeadLetterRetention, RetentionConfig
from pipeline.messaging.inbox import InboxConsumer, IngestResult
from pipeline.messaging.metrics import BrokerMetrics
from pipeline.messaging.outbox import OutboxRelay, RelayConfig
from pipeline.messaging.scheduler import (
    NotificationListener,
    Scheduler,
    SchedulerConfig,
    WorkSignal,
)

__all__ = [
    "BrokerConfig",
    "BrokerMetrics",
    "DeadLetterArchiver",
    "DeadLetterRetention",
    "Delivery",
    "Disposition",
    "InboxConsumer",
    "IngestResult",
    "NotificationListener",
    "OutboxRelay",
    "RelayConfig",
    "RetentionConfig",
    "Scheduler",
    "SchedulerConfig",
    "Settlement",
    "WorkSignal",
    "declare_topology",
]
