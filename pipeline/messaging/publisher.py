"""Publishing with confirms: a message is published once the broker confirms it.

:class:`ConfirmingPublisher` publishes on its own :class:`~pipeline.messaging.broker.AmqpLink`
with publisher confirms: a confirm means the broker has taken responsibility for
the message (persisted to a quorum queue, or routed nowhere and returned); a
nack, a return or a lost connection is a :class:`PublishStatus` the outbox relay
retries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pika

from pipeline.messaging.broker import AmqpLink, BrokerConfig


# ------------------------------------------------------------------- publisher
class PublishStatus(StrEnum):
    CONFIRMED = "confirmed"  #: the broker took responsibility (and routed it)
    RETURNED = "returned"  #: unroutable: basic.return, then the confirm
    NACKED = "nacked"  #: the broker refused it (e.g. reject-publish overflow)
    UNKNOWN = "unknown"  #: no confirm: timeout or connection lost; publish again


@dataclass(frozen=True)
class Outgoing:
    """One persistent message to publish with ``mandatory``."""

    exchange: str
    routing_key: str
    body: bytes
    message_id: str
    message_type: str
    headers: dict[str, Any] = field(default_factory=dict)

    def properties(self) -> pika.BasicProperties:
        return pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent,
            content_type="application/json",
            message_id=self.message_id,
            type=self.message_type,
            app_id="fenceline",
            timestamp=int(time.time()),
            headers=self.headers,
        )


@dataclass(frozen=True)
class PublishResult:
    message_id: str
    status: PublishStatus
    detail: str = ""


@dataclass
class _ConfirmState:
    """Delivery tags of one confirm-mode channel; a new link starts a new state."""

    link: AmqpLink
    next_tag: int = 0
    pending: dict[int, tuple[str, asyncio.Future[PublishResult]]] = field(default_factory=dict)
    returned: dict[str, str] = field(default_factory=dict)

    def resolve(self, tag: int, multiple: bool, ack: bool) -> None:
        tags = [t for t in self.pending if t <= tag] if multiple else [tag]
        for t in tags:
            entry = self.pending.pop(t, None)
            if entry is None:
                continue
            message_id, fut = entry
            if fut.done():
                continue
            if not ack:
                fut.set_result(PublishResult(message_id, PublishStatus.NACKED, "basic.nack"))
            elif message_id in self.returned:
                why = self.returned.pop(message_id)
                fut.set_result(PublishResult(message_id, PublishStatus.RETURNED, why))
            else:
                fut.set_result(PublishResult(message_id, PublishStatus.CONFIRMED))

    def fail_all(self, detail: str) -> None:
        for message_id, fut in self.pending.values():
            if not fut.done():
                fut.set_result(PublishResult(message_id, PublishStatus.UNKNOWN, detail))
        self.pending.clear()


class ConfirmingPublisher:
    """Publishes batches with ``mandatory`` and publisher confirms, pipelined.

    Only one batch is in flight at a time. After a confirm timeout the link is
    dropped (its state is unknown) and the next batch opens a fresh one, so late
    confirms of an abandoned channel can never be mistaken for new ones.
    """

    def __init__(self, cfg: BrokerConfig, *, name: str = "publisher") -> None:
        self.cfg = cfg
        self.name = name
        self._state: _ConfirmState | None = None
        self._lock = asyncio.Lock()
        self._abandoned: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        return self._state is not None and self._state.link.is_open

    async def connect(self) -> None:
        """Ensure an open confirm-mode channel; :class:`BrokerUnavailable` if not."""
        if self.connected:
            return
        link = await AmqpLink.open(self.cfg, self.name)
        state = _ConfirmState(link)

        def on_confirm(frame: Any) -> None:
            m = frame.method
            state.resolve(m.delivery_tag, m.multiple, isinstance(m, pika.spec.Basic.Ack))

        def on_return(_ch: Any, method: Any, props: Any, _body: bytes) -> None:
            state.returned[str(props.message_id)] = f"{method.reply_code} {method.reply_text}"

        link.channel.add_on_return_callback(on_return)
        await link.call(
            lambda cb: link.channel.confirm_delivery(on_confirm, callback=cb),
            self.cfg.connect_timeout_seconds,
        )
        link.closed.add_done_callback(
            lambda f: state.fail_all(f"connection closed: {f.result()!r}")
        )
        self._state = state

    async def publish(
        self, messages: Sequence[Outgoing], *, timeout: float | None = None
    ) -> list[PublishResult]:
        """Publish ``messages`` and wait for their confirms, at most ``timeout`` seconds.

        Raises:
            BrokerUnavailable: no connection could be opened; nothing was sent.
        """
        timeout = timeout if timeout is not None else self.cfg.confirm_timeout_seconds
        async with self._lock:
            await self.connect()
            state = self._state
            assert state is not None
            loop = asyncio.get_running_loop()
            futures: list[asyncio.Future[PublishResult]] = []
            for m in messages:
                fut: asyncio.Future[PublishResult] = loop.create_future()
                futures.append(fut)
                if not state.link.is_open:
                    fut.set_result(PublishResult(m.message_id, PublishStatus.UNKNOWN, "closed"))
                    continue
                state.next_tag += 1
                state.pending[state.next_tag] = (m.message_id, fut)
                try:
                    state.link.channel.basic_publish(
                        m.exchange, m.routing_key, m.body, m.properties(), mandatory=True
                    )
                except Exception as exc:  # the channel died under us: outcome unknown
                    state.fail_all(f"publish failed: {exc!r}")
            pending = [f for f in futures if not f.done()]
            try:
                if pending:
                    await asyncio.wait(pending, timeout=timeout)
            except BaseException:  # cancelled mid-wait (the relay's round deadline)
                self._abandon(state, "publish cancelled while waiting for confirms")
                raise
            if any(not f.done() for f in futures):
                # Confirms overdue: the channel's state is unknown; never reuse it.
                self._abandon(state, f"no confirm within {timeout}s")
            return [f.result() for f in futures]

    def _abandon(self, state: _ConfirmState, detail: str) -> None:
        """Never reuse ``state``'s channel: its unconfirmed messages are UNKNOWN."""
        if self._state is state:
            self._state = None
        state.fail_all(detail)
        closing = asyncio.get_running_loop().create_task(state.link.close())
        self._abandoned.add(closing)
        closing.add_done_callback(self._abandoned.discard)

    async def reset(self, detail: str) -> None:
        """Drop the current link (its state is unknown); the next publish opens a new one."""
        state = self._state
        if state is not None:
            self._abandon(state, detail)

    async def close(self) -> None:
        async with self._lock:
            state, self._state = self._state, None
            if state is not None:
                state.fail_all("publisher closed")
                await state.link.close()
