"""Helpers for tests against the real RabbitMQ: unique topologies, raw publishes,
queue inspection. A missing RabbitMQ is an error, never a skip.

Every test gets its own exchange, queues and DLX (names carry a random suffix)
so parallel runs on the shared broker never collide; ``delete_topology`` removes
them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pika

from pipeline.messaging import BrokerConfig, declare_topology
from pipeline.settings import Settings

AMQP_URL = os.environ.get("FENCELINE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")


def broker_settings(dsn: str, amqp_url: str | None = AMQP_URL, **overrides: Any) -> Settings:
    """Settings with a topology no other test uses."""
    tag = f"fltest.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    values: dict[str, Any] = {
        "database_url": dsn,
        "amqp_url": amqp_url,
        "amqp_exchange": f"{tag}.x",
        "amqp_work_queue": f"{tag}.work",
        "amqp_dead_letter_exchange": f"{tag}.dlx",
        "amqp_dead_letter_queue": f"{tag}.dlq",
        "amqp_confirm_timeout_seconds": 5.0,
        "amqp_connect_timeout_seconds": 2.0,
    }
    values.update(overrides)
    return Settings(**values)


def config(settings: Settings) -> BrokerConfig:
    cfg = BrokerConfig.from_settings(settings)
    assert cfg is not None, "these settings name no broker"
    return cfg


def _connect(url: str = AMQP_URL) -> pika.BlockingConnection:
    try:
        return pika.BlockingConnection(pika.URLParameters(url))
    except pika.exceptions.AMQPConnectionError as exc:  # pragma: no cover - environment
        raise RuntimeError(f"RabbitMQ is required for these tests at {url}: {exc!r}") from exc


def delete_topology(settings: Settings) -> None:
    cfg = config(settings)
    conn = _connect()
    try:
        ch = conn.channel()
        for queue in (cfg.work_queue, cfg.dead_letter_queue):
            ch.queue_delete(queue)
        for exchange in (cfg.exchange, cfg.dead_letter_exchange):
            ch.exchange_delete(exchange)
    finally:
        conn.close()


@dataclass(frozen=True)
class Message:
    body: bytes
    headers: dict[str, Any]
    message_id: str | None
    message_type: str | None
    routing_key: str
    redelivered: bool


def _take_all(queue: str, ack: bool) -> list[Message]:
    conn = _connect()
    out: list[Message] = []
    try:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=ack)
            if method is None:
                break
            out.append(
                Message(
                    body,
                    dict(props.headers or {}),
                    props.message_id,
                    props.type,
                    method.routing_key,
                    method.redelivered,
                )
            )
    finally:
        conn.close()  # unacked gets go back to the queue
    return out


async def take_all(queue: str) -> list[Message]:
    """Consume (ack) every ready message of ``queue``."""
    return await asyncio.to_thread(_take_all, queue, True)


async def peek_all(queue: str) -> list[Message]:
    """Every ready message of ``queue``, returned to the queue afterwards."""
    return await asyncio.to_thread(_take_all, queue, False)


def _count(queue: str) -> int:
    conn = _connect()
    try:
        return int(conn.channel().queue_declare(queue, passive=True).method.message_count)
    finally:
        conn.close()


async def ready_count(queue: str) -> int:
    return await asyncio.to_thread(_count, queue)


def _publish(
    exchange: str,
    routing_key: str,
    body: bytes,
    headers: dict[str, Any] | None,
    message_id: str | None,
) -> None:
    conn = _connect()
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish(
            exchange,
            routing_key,
            body,
            pika.BasicProperties(delivery_mode=2, headers=headers, message_id=message_id),
            mandatory=True,
        )
    finally:
        conn.close()


async def publish_raw(
    settings: Settings,
    body: bytes,
    *,
    headers: dict[str, Any] | None = None,
    message_id: str | None = None,
) -> None:
    """Publish ``body`` to the work queue as any producer could (confirmed, mandatory)."""
    cfg = config(settings)
    await asyncio.to_thread(_publish, cfg.exchange, cfg.work_routing_key, body, headers, message_id)


@contextlib.asynccontextmanager
async def topology(dsn: str, **overrides: Any) -> AsyncIterator[Settings]:
    """Settings for ``dsn`` with a fresh, declared topology, deleted afterwards."""
    settings = broker_settings(dsn, **overrides)
    await asyncio.to_thread(declare_topology, config(settings))
    try:
        yield settings
    finally:
        await asyncio.to_thread(delete_topology, settings)
