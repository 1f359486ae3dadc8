"""RabbitMQ adapter: topology, the event message, confirmed publishing, consuming.

What a confirm and an ack mean here (they cover different boundaries):

* A publisher confirm says the broker took responsibility for a message (a
  quorum queue replicated it). It says nothing about a consumer. The relay marks
  an outbox event published only after its confirm; a missing confirm (timeout,
  dropped connection) is an *unknown* outcome and the event is published again,
  so consumers dedupe (:mod:`pipeline.messaging.inbox`).
* ``mandatory`` makes an unroutable publish come back as ``basic.return`` before
  its confirm, so "confirmed but routed nowhere" is reported as RETURNED, never
  as published.
* A consumer acks only after its handler's database transaction committed.

Topology (declared idempotently; every name comes from :class:`Settings`)::

    exchange (topic, durable) --work routing key--> work queue (quorum)
        x-dead-letter-exchange=DLX, x-dead-letter-strategy=at-least-once,
        x-overflow=reject-publish (required by at-least-once), x-delivery-limit
    DLX (fanout, durable) --> DLQ (quorum)

RabbitMQ 3.10 is the oldest version this needs: quorum queues with
``x-delivery-limit`` exist since 3.8, at-least-once dead-lettering since 3.10.

pika's :class:`AsyncioConnection` runs each connection on the service's own event
loop, so one thread owns each connection (pika connections are not thread-safe)
and no publish blocks the loop. Only :func:`declare_topology` uses a blocking
connection; services run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
from pika.adapters.asyncio_connection import AsyncioConnection
from pydantic import BaseModel, ConfigDict, Field

from pipeline.errors import BrokerUnavailable, PoisonMessage
from pipeline.settings import Settings
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

#: Message schema versions this build reads; anything else is poison.
SUPPORTED_VERSIONS = frozenset({1})
MESSAGE_FIELDS = ("event_id", "type", "version", "job_id")

HEADER_REASON = "x-fenceline-reason"
HEADER_DETAIL = "x-fenceline-detail"
HEADER_SOURCE = "x-fenceline-source"
HEADER_SENT_AT = "x-fenceline-sent-at-us"  # integer microseconds (AMQP has no float)
HEADER_ORIGIN_QUEUE = "x-fenceline-queue"
HEADER_ORIGIN_ROUTING_KEY = "x-fenceline-routing-key"


class BrokerConfig(BaseModel):
    """Validated broker settings; built by :meth:`from_settings`."""

    model_config = ConfigDict(frozen=True)

    url: str
    exchange: str = Field(min_length=1)
    work_queue: str = Field(min_length=1)
    work_routing_key: str = Field(min_length=1)
    dead_letter_exchange: str = Field(min_length=1)
    dead_letter_queue: str = Field(min_length=1)
    delivery_limit: int = Field(ge=1)
    work_queue_max_length: int | None = Field(default=None, ge=1)
    prefetch: int = Field(ge=1)
    confirm_timeout_seconds: float = Field(gt=0)
    connect_timeout_seconds: float = Field(gt=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> BrokerConfig | None:
        """The broker configuration, or None in broker-less mode (no ``amqp_url``)."""
        if not settings.amqp_url:
            return None
        return cls(
            url=settings.amqp_url,
            exchange=settings.amqp_exchange,
            work_queue=settings.amqp_work_queue,
            work_routing_key=settings.amqp_work_routing_key,
            dead_letter_exchange=settings.amqp_dead_letter_exchange,
            dead_letter_queue=settings.amqp_dead_letter_queue,
            delivery_limit=settings.amqp_delivery_limit,
            work_queue_max_length=settings.amqp_work_queue_max_length,
            prefetch=settings.amqp_prefetch,
            confirm_timeout_seconds=settings.amqp_confirm_timeout_seconds,
            connect_timeout_seconds=settings.amqp_connect_timeout_seconds,
        )

    @classmethod
    def required(cls, settings: Settings, who: str) -> BrokerConfig:
        """The broker configuration for a service that cannot run without one."""
        cfg = cls.from_settings(settings)
        if cfg is None:
            raise ValueError(f"the {who} needs a broker (FENCELINE_AMQP_URL)")
        return cfg

    def parameters(self, name: str) -> pika.URLParameters:
        """Connection parameters; timeouts from the URL win over the config."""
        params = pika.URLParameters(self.url)
        query = self.url.partition("?")[2]
        if "socket_timeout" not in query:
            params.socket_timeout = self.connect_timeout_seconds
        if "stack_timeout" not in query:
            params.stack_timeout = self.connect_timeout_seconds
        if "blocked_connection_timeout" not in query:
            # A connection the broker blocks (memory or disk alarm) is closed after
            # this long instead of holding publishes, and blocking calls, forever.
            params.blocked_connection_timeout = max(
                self.confirm_timeout_seconds, self.connect_timeout_seconds
            )
        params.client_properties = {"connection_name": f"fenceline-{name}"}
        return params

    def work_queue_arguments(self) -> dict[str, Any]:
        """Quorum queue whose dead letters are forwarded at-least-once."""
        args: dict[str, Any] = {
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": self.dead_letter_exchange,
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
            "x-delivery-limit": self.delivery_limit,
        }
        if self.work_queue_max_length is not None:
            args["x-max-length"] = self.work_queue_max_length
        return args


# --------------------------------------------------------------------- topology
@dataclass(frozen=True)
class TopologyReport:
    exchange: str
    work_queue: str
    dead_letter_exchange: str
    dead_letter_queue: str
    work_messages: int
    dead_letter_messages: int


def _connect(cfg: BrokerConfig, purpose: str) -> pika.BlockingConnection:
    """A blocking connection named for ``purpose``; any AMQP failure is BrokerUnavailable."""
    try:
        return pika.BlockingConnection(cfg.parameters(purpose))
    except pika.exceptions.AMQPError as exc:
        raise BrokerUnavailable(f"cannot connect to the broker: {exc!r}") from exc


def declare_topology(cfg: BrokerConfig) -> TopologyReport:
    """Declare exchange, work queue, DLX and DLQ; idempotent (blocking: run in a thread).

    Re-declaring with the same arguments is a no-op; different arguments make the
    broker refuse (PRECONDITION_FAILED), which is surfaced, never papered over.
    """
    conn = _connect(cfg, "setup")
    try:
        ch = conn.channel()
        ch.exchange_declare(cfg.dead_letter_exchange, exchange_type="fanout", durable=True)
        dlq = ch.queue_declare(
            cfg.dead_letter_queue, durable=True, arguments={"x-queue-type": "quorum"}
        )
        ch.queue_bind(cfg.dead_letter_queue, cfg.dead_letter_exchange, routing_key="")
        ch.exchange_declare(cfg.exchange, exchange_type="topic", durable=True)
        work = ch.queue_declare(cfg.work_queue, durable=True, arguments=cfg.work_queue_arguments())
        ch.queue_bind(cfg.work_queue, cfg.exchange, routing_key=cfg.work_routing_key)
        return TopologyReport(
            exchange=cfg.exchange,
            work_queue=cfg.work_queue,
            dead_letter_exchange=cfg.dead_letter_exchange,
            dead_letter_queue=cfg.dead_letter_queue,
            work_messages=work.method.message_count,
            dead_letter_messages=dlq.method.message_count,
        )
    finally:
        if conn.is_open:
            conn.close()


def setup_topology(settings: Settings) -> TopologyReport:
    """``fenceline broker setup``: declare the topology named by ``settings``."""
    cfg = BrokerConfig.from_settings(settings)
    if cfg is None:
        raise BrokerUnavailable("no broker configured (FENCELINE_AMQP_URL is unset)")
    return declare_topology(cfg)


def queue_depths(cfg: BrokerConfig) -> dict[str, int]:
    """Ready messages in the work queue and the DLQ (blocking: run in a thread)."""
    conn = _connect(cfg, "depth")
    try:
        ch = conn.channel()
        return {
            name: ch.queue_declare(name, passive=True).method.message_count
            for name in (cfg.work_queue, cfg.dead_letter_queue)
        }
    except pika.exceptions.AMQPError as exc:
        raise BrokerUnavailable(f"cannot read queue depths: {exc!r}") from exc
    finally:
        if conn.is_open:
            conn.close()


# ---------------------------------------------------------------------- message
@dataclass(frozen=True)
class EventMessage:
    """The only thing on the wire: references, never document text.

    The body is canonical JSON, so the same event always has the same digest
    however often the relay publishes it; the inbox compares digests to tell a
    redelivery (same) from a conflicting reuse of an event id (different).
    """

    event_id: uuid.UUID
    event_type: str
    version: int
    job_id: uuid.UUID | None

    def body(self) -> bytes:
        doc = {
            "event_id": str(self.event_id),
            "type": self.event_type,
            "version": self.version,
            "job_id": str(self.job_id) if self.job_id else None,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def digest(self) -> str:
        return hashlib.sha256(self.body()).hexdigest()

    @classmethod
    def parse(cls, body: bytes) -> EventMessage:
        """Decode and validate; :class:`PoisonMessage` names what is wrong."""
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError) as exc:
            raise PoisonMessage("not_json", str(exc)[:200]) from None
        if not isinstance(doc, dict):
            raise PoisonMessage("not_object", type(doc).__name__)
        if "version" not in doc:
            raise PoisonMessage("missing_fields", "version")
        version = doc["version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise PoisonMessage("unknown_version", repr(version)[:50])
        if version not in SUPPORTED_VERSIONS:
            raise PoisonMessage("unknown_version", str(version))
        missing = [k for k in MESSAGE_FIELDS if k not in doc]
        if missing:
            raise PoisonMessage("missing_fields", ",".join(missing))
        extra = sorted(set(doc) - set(MESSAGE_FIELDS))
        if extra:
            raise PoisonMessage("unexpected_fields", ",".join(extra)[:200])
        if not isinstance(doc["type"], str) or not doc["type"]:
            raise PoisonMessage("invalid_field", "type")
        try:
            event_id = uuid.UUID(str(doc["event_id"]))
            job_id = uuid.UUID(str(doc["job_id"])) if doc["job_id"] is not None else None
        except ValueError:
            raise PoisonMessage("invalid_field", "event_id or job_id is not a UUID") from None
        return cls(event_id=event_id, event_type=doc["type"], version=version, job_id=job_id)


# ------------------------------------------------------------------ connection
class AmqpLink:
    """One AMQP connection with one channel, living on the running event loop.

    ``closed`` resolves (with the cause) when either the connection or the
    channel closes; every pending RPC fails with :class:`BrokerUnavailable` then.
    """

    def __init__(self, connection: Any, channel: Any, closed: asyncio.Future[BaseException]):
        self.connection = connection
        self.channel = channel
        self.closed = closed

    @classmethod
    async def open(cls, cfg: BrokerConfig, name: str) -> AmqpLink:
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[Any] = loop.create_future()
        closed: asyncio.Future[BaseException] = loop.create_future()

        def on_open(conn: Any) -> None:
            if not opened.done():
                opened.set_result(conn)

        def on_open_error(_conn: Any, exc: BaseException) -> None:
            if not opened.done():
                opened.set_exception(BrokerUnavailable(f"cannot connect: {exc!r}"))
            if not closed.done():
                closed.set_result(exc)

        def on_close(_conn: Any, exc: BaseException) -> None:
            if not closed.done():
                closed.set_result(exc)

        conn = AsyncioConnection(
            cfg.parameters(name),
            on_open_callback=on_open,
            on_open_error_callback=on_open_error,
            on_close_callback=on_close,
            custom_ioloop=loop,
        )
        try:
            await wait_within(asyncio.shield(opened), cfg.connect_timeout_seconds)
        except TimeoutError:
            _close_quietly(conn)
            raise BrokerUnavailable("broker connection timed out") from None
        channel_opened: asyncio.Future[Any] = loop.create_future()
        conn.channel(on_open_callback=lambda ch: channel_opened.set_result(ch))
        link = cls(conn, None, closed)
        link.channel = await link.wait_reply(channel_opened, cfg.connect_timeout_seconds)

        def on_channel_close(_ch: Any, exc: BaseException) -> None:
            if not closed.done():
                closed.set_result(exc)
            _close_quietly(conn)

        link.channel.add_on_close_callback(on_channel_close)
        return link

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    async def wait_reply(self, fut: asyncio.Future[Any], timeout: float) -> Any:
        done, _ = await asyncio.wait(
            {fut, self.closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if fut in done:
            return fut.result()
        if self.closed.done():
            raise BrokerUnavailable(f"broker connection closed: {self.closed.result()!r}")
        raise BrokerUnavailable(f"broker did not answer within {timeout}s")

    async def call(self, start: Callable[[Callable[..., None]], Any], timeout: float) -> Any:
        """Run one callback-style pika RPC and await its reply frame."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(*args: Any) -> None:
            if not fut.done():
                fut.set_result(args[0] if len(args) == 1 else args)

        start(done)
        return await self.wait_reply(fut, timeout)

    async def close(self, timeout: float = 2.0) -> None:
        """Close politely; a wedged connection is abandoned after ``timeout``."""
        _close_quietly(self.connection)
        try:
            await wait_within(asyncio.shield(self.closed), timeout)
        except TimeoutError:
            log.warning("broker connection did not close within %.1fs; abandoned", timeout)


def _close_quietly(conn: Any) -> None:
    try:
        if not (conn.is_closing or conn.is_closed):
            conn.close()
    except Exception:  # the connection is already gone; nothing to close
        log.debug("closing a broker connection failed", exc_info=True)
