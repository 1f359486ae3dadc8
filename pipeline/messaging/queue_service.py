"""A service that is one queue consumer and the handler it calls.

The ingress consumer (:class:`~pipeline.messaging.inbox.InboxConsumer`) and the
DLQ archiver (:class:`~pipeline.messaging.dlq.DeadLetterArchiver`) are each a
:class:`~pipeline.messaging.consumer.QueueConsumer` whose handler does their
durable work; :class:`QueueService` is what they share: the consumer built over
:meth:`QueueService.handle`, and the service's start, stop and health as the
consumer's. Each says what its ``run_once`` (a pull-mode drain) returns.
"""

from __future__ import annotations

from pipeline.messaging.broker import BrokerConfig
from pipeline.messaging.consumer import Delivery, Disposition, QueueConsumer
from pipeline.service import ServiceHealth


class QueueService:
    """Consumes ``queue`` with :meth:`handle`; start, stop and health are the consumer's.

    Args:
        cfg: broker configuration (URL, queue names, timeouts).
        queue: the queue to consume.
        prefetch: unacknowledged deliveries at most.
        name: the consumer's connection name.
        source: the dead letters' ``x-fenceline-source`` header.
        handler_timeout: longest one handler may run; then its delivery is requeued.
        backoff: first and longest pause between reconnects and requeues.
    """

    def __init__(
        self,
        cfg: BrokerConfig,
        queue: str,
        *,
        prefetch: int,
        name: str,
        source: str,
        handler_timeout: float,
        backoff: tuple[float, float],
    ) -> None:
        self.cfg = cfg
        self.consumer = QueueConsumer(
            cfg,
            queue,
            self.handle,
            prefetch=prefetch,
            name=name,
            source=source,
            handler_timeout=handler_timeout,
            backoff=backoff,
        )

    async def handle(self, d: Delivery) -> Disposition:
        """Decide one delivery; the consumer settles it only after this returns."""
        raise NotImplementedError

    async def start(self) -> None:
        """Declare the topology and consume (an unreachable broker is retried)."""
        await self.consumer.open()

    @property
    def running(self) -> bool:
        return self.consumer.running

    def stalled(self) -> bool:
        """The consumer loop is gone or stuck (:meth:`QueueConsumer.stalled`)."""
        return self.consumer.stalled()

    def health(self) -> ServiceHealth:
        return self.consumer.health()

    async def stop(self) -> None:
        await self.consumer.stop()
