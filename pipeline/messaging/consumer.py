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
drops the connection. Its loop never ends but by :meth:`QueueConsumer.stop`: any
failed connection cycle is logged and retried with bounded backoff, each handler
runs for at most ``handler_timeout`` seconds, and a failed or timed-out handler's
delivery is requeued after a bounded backoff (no hot redelivery loop).
:attr:`QueueConsumer.progress` records each cycle and each bounded wait while
connected, so :meth:`QueueConsumer.stalled` tells a dead or stuck loop from an
idle one (the maintenance actor's ``start()`` replaces a stalled consumer, as it
does a stalled relay). Pull mode (:meth:`QueueConsumer.run_once`) takes up to
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
from pipeline.hooks import Hooks
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
from pipeline.service import LoopService
from pipeline.waiting import wait_within

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


@dataclass(frozen=True)
class Settlement:
    """A delivery the consumer acked or requeued, and what decided it (the event of
    :attr:`QueueConsumer.on_settled`)."""

    delivery: Delivery
    disposition: Disposition


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


def _log_death(name: str, task: asyncio.Task[None]) -> None:
    """A loop that ended other than by stop() (a cancel, or a bug) is reported at once."""
    if task.cancelled():
        log.error("consumer %s: the loop was cancelled", name)
    elif (exc := task.exception()) is not None:
        log.error("consumer %s: the loop died", name, exc_info=exc)


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


class QueueConsumer(LoopService):
    """Consumes ``queue`` and settles each delivery after ``handler`` returns.

    Args:
        cfg: broker configuration (URL, DLX name, timeouts).
        queue: the queue to consume.
        handler: does the durable work; must be idempotent per message.
        prefetch: unacknowledged deliveries at most (basic.qos).
        name: connection name, visible in the broker's management UI.
        source: written to the ``x-fenceline-source`` header of dead letters.
        backoff: first and longest pause between reconnects and before requeueing
            a delivery whose handler failed (doubling per consecutive failure).
        handler_timeout: longest one handler may run; then its delivery is requeued.
        stall_seconds: no cycle or wait finished for this long: the loop is stuck.
        beat_seconds: while connected, the loop records progress this often.
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
        handler_timeout: float = 30.0,
        stall_seconds: float = 90.0,
        beat_seconds: float = 5.0,
    ) -> None:
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        if stall_seconds <= max(beat_seconds, backoff[1], cfg.connect_timeout_seconds):
            raise ValueError("stall_seconds must exceed the longest wait of one cycle")
        self.cfg = cfg
        self.queue = queue
        self.handler = handler
        self.prefetch = prefetch
        self.name = name
        self.source = source
        self.backoff = backoff
        self.handler_timeout = handler_timeout
        self.stall_seconds = stall_seconds
        self.beat_seconds = beat_seconds
        #: Handlers that failed in a row (the requeue backoff); 0 after a success.
        self._failures = 0
        self._delay = backoff[0]
        self.dead_letters = ConfirmingPublisher(cfg, name=f"{name}-dlx")
        #: Set while a consumer is registered with the broker (tests wait on it).
        self.consuming = asyncio.Event()
        self._stopping = asyncio.Event()
        self._pull: AmqpLink | None = None
        self._inflight: set[asyncio.Task[Disposition]] = set()
        #: Run after each delivery was acked or requeued (tests wait on these): after
        #: the ack, so a hook that raises cannot undo it (it fails that delivery's
        #: handling: its task in push mode, ``run_once`` in pull mode).
        self.on_settled: Hooks[None, Settlement] = Hooks()

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
        task = self._launch(self._supervise(), f"consumer-{self.name}")
        task.add_done_callback(partial(_log_death, self.name))

    def health_name(self) -> str:
        """Each connection cycle and each bounded wait while connected is a pass."""
        return f"consumer {self.name}"

    def health_details(self) -> dict[str, Any]:
        return {"consuming": self.consuming.is_set(), "in_flight": len(self._inflight)}

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Stop taking deliveries, let in-flight handlers settle, then disconnect.

        Handlers still running after ``drain_timeout`` are cancelled without an
        ack; the broker redelivers their messages. A loop that does not stop
        within ``drain_timeout`` plus one connect timeout (a stuck one) is cancelled.
        """
        self._stopping.set()
        if self._task is not None:
            task, self._task = self._task, None
            await asyncio.wait({task}, timeout=drain_timeout + self.cfg.connect_timeout_seconds)
            if not task.done():
                log.error("consumer %s: the loop did not stop in time; cancelled", self.name)
                task.cancel()
                await asyncio.wait({task})
        await self._drain(drain_timeout)
        if self._pull is not None:
            await self._pull.close()
            self._pull = None
        await self.dead_letters.close()

    async def _supervise(self) -> None:
        """Connect, consume until the link drops or stop(), repeat; never ends otherwise."""
        self._delay = self.backoff[0]
        while not self._stopping.is_set():
            try:
                await self._cycle()
            except Exception as exc:  # any failed cycle is retried; it never ends the loop
                self.progress.failed(exc)
                self.consuming.clear()
                delay = self._delay
                if isinstance(exc, BrokerUnavailable):
                    log.warning("consumer %s: %s; retrying in %.1fs", self.name, exc, delay)
                else:
                    log.error("consumer %s: cycle failed; retrying", self.name, exc_info=exc)
                await self._sleep(delay)
                self._delay = min(delay * 2, self.backoff[1])

    async def _cycle(self) -> None:
        """One connection: register, record progress while it lasts, then close it."""
        link = await AmqpLink.open(self.cfg, self.name)
        try:
            tag = await self._register(link)
        except BaseException:
            await link.close()
            raise
        self._delay = self.backoff[0]  # registered: the next drop retries quickly again
        self.consuming.set()
        self.progress.succeeded()
        stop: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        try:
            while link.is_open and not stop.done():
                await asyncio.wait(
                    {link.closed, stop},
                    timeout=self.beat_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                self.progress.succeeded()  # a bounded wait finished: the loop is alive
        finally:
            stop.cancel()
            self.consuming.clear()
        if not link.is_open:
            raise BrokerUnavailable(f"connection lost: {link.closed.result()!r}")
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
            await wait_within(self._stopping.wait(), seconds)
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
            async with asyncio.timeout(self.handler_timeout):
                disposition = await self.handler(d)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # TimeoutError included: the handler overran
            disposition = REQUEUE
            self._failures += 1
            pause = min(self.backoff[0] * 2 ** (self._failures - 1), self.backoff[1])
            log.error(
                "consumer %s: handler failed for %s (%r); requeued in %.1fs",
                self.name,
                d.message_id,
                exc,
                pause,
                exc_info=not isinstance(exc, TimeoutError),
            )
            await self._sleep(pause)  # bounded backoff: no hot redelivery loop
        else:
            self._failures = 0
        if disposition.action == "dead_letter":
            settled = await self._dead_letter(d, disposition)
            disposition = replace(settled, reason=disposition.reason, result=disposition.result)
        self._settle(link, d, disposition)
        await self.on_settled.run(None, Settlement(d, disposition))
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
