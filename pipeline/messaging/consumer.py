"""Queue consumer: bounded prefetch, acknowledgement only after the handler finished.

The handler does its durable work (the inbox transaction, the dead-letter
archive insert) and returns a :class:`Disposition`; the consumer then acks,
requeues, or first republishes the message to the dead-letter exchange with a
reason header and acks only once that publish is confirmed. A crash anywhere
before the ack leaves the message unacknowledged, so the broker redelivers it:
handlers must be idempotent, and the inbox is.

Prefetch bounds how many deliveries are in the consumer's hands (and therefore
how many handler transactions run at once); it has nothing to do with inference
concurrency, which the drivers bound separately.

Push mode (:meth:`QueueConsumer.start`) reconnects with backoff after the broker
drops the connection; pull mode (:meth:`QueueConsumer.run_once`) takes up to
``limit`` messages with ``basic.get`` and handles them one by one, for tests and
one-shot operator drains.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import pika

from pipeline.errors import BrokerUnavailable
from pipeline.messaging.broker import (
    HEADER_DETAIL,
    HEADER_ORIGIN_QUEUE,
    HEADER_ORIGIN_ROUTING_KEY,
    HEADER_REASON,
    HEADER_SOURCE,
    AmqpLink,
    BrokerConfig,
    declare_topology,
)
from pipeline.messaging.publisher import ConfirmingPublisher, Outgoing, PublishStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    body: bytes
    message_id: str | None
    message_type: str | None
    routing_key: str
    exchange: str
    redelivered: bool
    headers: dict[str, Any]
    delivery_tag: int


@dataclass(frozen=True)
class Disposition:
    """What to do with a delivery once its handler returned."""

    action: Literal["ack", "dead_letter", "requeue"]
    reason: str = ""
    detail: str = ""
    #: What the handler decided, passed on to ``on_settled`` hooks.
    result: Any = None


ACK = Disposition("ack")
REQUEUE = Disposition("requeue")

Handler = Callable[[Delivery], Awaitable[Disposition]]


def dead_letter_message(
    exchange: str, queue: str, d: Delivery, reason: str, detail: str, *, source: str
) -> Outgoing:
    """The delivery, body unchanged, addressed to the DLX with why it was dead-lettered."""
    headers = dict(d.headers)
    headers.update(
        {
            HEADER_REASON: reason,
            HEADER_DETAIL: detail[:500],
            HEADER_SOURCE: source,
            HEADER_ORIGIN_QUEUE: queue,
            HEADER_ORIGIN_ROUTING_KEY: d.routing_key,
        }
    )
    return Outgoing(
        exchange=exchange,
        routing_key=reason,
        body=d.body,
        message_id=d.message_id or f"anon-{hashlib.sha256(d.body).hexdigest()[:32]}",
        message_type=d.message_type or "unknown",
        headers=headers,
    )


def _delivery(method: Any, props: Any, body: bytes) -> Delivery:
    return Delivery(
        body=bytes(body),
        message_id=props.message_id,
        message_type=props.type,
        routing_key=method.routing_key,
        exchange=method.exchange,
        redelivered=bool(method.redelivered),
        headers=dict(props.headers or {}),
        delivery_tag=method.delivery_tag,
    )


class QueueConsumer:
    """Consumes ``queue`` and settles each delivery after ``handler`` returns.

    Args:
        cfg: broker configuration (URL, DLX name, timeouts).
        queue: the queue to consume.
        handler: does the durable work; must be idempotent per message.
        prefetch: unacknowledged deliveries at most (basic.qos).
        name: connection name, visible in the broker's management UI.
        source: written to the ``x-fenceline-source`` header of dead letters.
    """

    def __init__(
        self,
        cfg: BrokerConfig,
        queue: str,
        handler: Handler,
        *,
        prefetch: int,
        name: str,
        source: str,
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self.cfg = cfg
        self.queue = queue
        self.handler = handler
        self.prefetch = prefetch
        self.name = name
        self.source = source
        self.backoff = backoff
        self.dead_letters = ConfirmingPublisher(cfg, name=f"{name}-dlx")
        #: Set while a consumer is registered with the broker (tests wait on it).
        self.consuming = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._pull: AmqpLink | None = None
        self._inflight: set[asyncio.Task[Disposition]] = set()
        #: Called after each delivery was acked or requeued (tests wait on these).
        self.on_settled: list[Callable[[Delivery, Disposition], None]] = []

    # ------------------------------------------------------------- lifecycle
    async def open(self) -> None:
        """Declare the topology, then start: the way a service starts its consumer.
        An unreachable broker is logged, not raised; the consumer reconnects until
        the broker is back."""
        try:
            await asyncio.to_thread(declare_topology, self.cfg)
        except BrokerUnavailable as exc:
            log.warning("%s: broker unreachable at start: %s", self.name, exc)
        await self.start()

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"consumer {self.name} already started")
        self._stopping.clear()
        self._task = asyncio.create_task(self._supervise(), name=f"consumer-{self.name}")

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Stop taking deliveries, let in-flight handlers settle, then disconnect.

        Handlers still running after ``drain_timeout`` are cancelled without an
        ack; the broker redelivers their messages.
        """
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self._drain(drain_timeout)
        if self._pull is not None:
            await self._pull.close()
            self._pull = None
        await self.dead_letters.close()

    async def _supervise(self) -> None:
        delay = self.backoff[0]
        while not self._stopping.is_set():
            try:
                link = await AmqpLink.open(self.cfg, self.name)
            except BrokerUnavailable as exc:
                log.warning("consumer %s: %s; retrying in %.1fs", self.name, exc, delay)
                await self._sleep(delay)
                delay = min(delay * 2, self.backoff[1])
                continue
            try:
                tag = await self._register(link)
            except BrokerUnavailable as exc:
                log.warning("consumer %s: cannot consume %s: %s", self.name, self.queue, exc)
                await link.close()
                await self._sleep(delay)
                delay = min(delay * 2, self.backoff[1])
                continue
            delay = self.backoff[0]
            self.consuming.set()
            stop: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
            closed: asyncio.Future[Any] = link.closed
            await asyncio.wait({closed, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            self.consuming.clear()
            if not link.is_open:
                log.warning("consumer %s lost its connection: %r", self.name, link.closed.result())
                await self._sleep(delay)
                continue
            await self._unregister(link, tag)

    async def _unregister(self, link: AmqpLink, tag: str) -> None:
        """Stopping: no new deliveries, let the in-flight ones ack, then close."""
        try:
            await link.call(
                lambda cb: link.channel.basic_cancel(tag, callback=cb),
                self.cfg.connect_timeout_seconds,
            )
        except BrokerUnavailable:
            pass
        await self._drain(self.cfg.confirm_timeout_seconds)
        await link.close()

    async def _register(self, link: AmqpLink) -> str:
        timeout = self.cfg.connect_timeout_seconds
        await link.call(
            lambda cb: link.channel.basic_qos(prefetch_count=self.prefetch, callback=cb), timeout
        )
        frame = await link.call(
            lambda cb: link.channel.basic_consume(
                self.queue, on_message_callback=partial(self._on_message, link), callback=cb
            ),
            timeout,
        )
        return str(frame.method.consumer_tag)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def _drain(self, timeout: float) -> None:
        if not self._inflight:
            return
        _, late = await asyncio.wait(set(self._inflight), timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)

    # -------------------------------------------------------------- handling
    def _on_message(self, link: AmqpLink, _ch: Any, method: Any, props: Any, body: bytes) -> None:
        task = asyncio.get_running_loop().create_task(
            self._handle(link, _delivery(method, props, body))
        )
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _handle(self, link: AmqpLink, d: Delivery) -> Disposition:
        try:
            disposition = await self.handler(d)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("consumer %s: handler failed for %s; requeued", self.name, d.message_id)
            disposition = REQUEUE
        if disposition.action == "dead_letter":
            settled = await self._dead_letter(d, disposition)
            disposition = replace(settled, reason=disposition.reason, result=disposition.result)
        self._settle(link, d, disposition)
        for hook in self.on_settled:
            hook(d, disposition)
        return disposition

    async def _dead_letter(self, d: Delivery, why: Disposition) -> Disposition:
        msg = dead_letter_message(
            self.cfg.dead_letter_exchange,
            self.queue,
            d,
            why.reason,
            why.detail,
            source=self.source,
        )
        try:
            [result] = await self.dead_letters.publish([msg])
        except BrokerUnavailable as exc:
            log.warning("consumer %s: dead-lettering %s failed: %s", self.name, d.message_id, exc)
            return REQUEUE
        if result.status is not PublishStatus.CONFIRMED:
            log.warning(
                "consumer %s: dead letter %s %s (%s); requeued",
                self.name,
                d.message_id,
                result.status,
                result.detail,
            )
            return REQUEUE
        return ACK

    def _settle(self, link: AmqpLink, d: Delivery, disposition: Disposition) -> None:
        if not link.is_open:
            # The broker requeues it; the handler is idempotent, so that is safe.
            log.info("consumer %s: connection gone before settling %s", self.name, d.message_id)
            return
        try:
            if disposition.action == "ack":
                link.channel.basic_ack(d.delivery_tag)
            else:
                link.channel.basic_nack(d.delivery_tag, requeue=True)
        except Exception:
            log.warning("consumer %s: settling %s failed", self.name, d.message_id, exc_info=True)

    # ------------------------------------------------------------- pull mode
    async def run_once(self, limit: int = 100) -> list[Disposition]:
        """Take up to ``limit`` ready messages with ``basic.get`` and settle each."""
        if self._pull is None or not self._pull.is_open:
            self._pull = await AmqpLink.open(self.cfg, f"{self.name}-pull")
        link = self._pull
        out: list[Disposition] = []
        while len(out) < limit:
            d = await self._get(link)
            if d is None:
                break
            out.append(await self._handle(link, d))
        return out

    async def _get(self, link: AmqpLink) -> Delivery | None:
        fut: asyncio.Future[Delivery | None] = asyncio.get_running_loop().create_future()

        def on_ok(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            if not fut.done():
                fut.set_result(_delivery(method, props, body))

        def on_empty(_frame: Any) -> None:
            if not fut.done():
                fut.set_result(None)

        link.channel.add_callback(on_empty, [pika.spec.Basic.GetEmpty], one_shot=True)
        link.channel.basic_get(self.queue, on_ok, auto_ack=False)
        result: Delivery | None = await link.wait_reply(fut, self.cfg.connect_timeout_seconds)
        return result
