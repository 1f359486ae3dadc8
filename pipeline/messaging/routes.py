"""Where an outbox event goes and what it looks like on the wire.

The relay (:mod:`pipeline.messaging.outbox`) decides *when* an event is published and
records the outcome; this module decides *where* (:class:`Route`, one per event type
that has a broker consumer) and *what* is sent: the message body (event id, type,
version and job id, never document text), the headers (send time, trace context, the
dead-letter reason) and the publication's span in the job's trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pipeline.jobs import EVENT_DEAD_LETTERED, EVENT_REQUESTED
from pipeline.messaging.broker import (
    HEADER_DETAIL,
    HEADER_REASON,
    HEADER_SENT_AT,
    HEADER_SOURCE,
    BrokerConfig,
    EventMessage,
)
from pipeline.messaging.publisher import Outgoing
from pipeline.tracing import SPAN_PUBLISH, Span, SpanKind, context_of, headers_with_context, tracer


@dataclass(frozen=True)
class Route:
    """Where an event type is published."""

    exchange: str
    routing_key: str


def default_routes(cfg: BrokerConfig) -> dict[str, Route]:
    """Execution requests go to the work queue; terminal dead-letter events to the DLQ.

    Other event types (completed, review, failed) have no broker consumer: the
    delivery and status paths read PostgreSQL. They are handled locally.
    """
    return {
        EVENT_REQUESTED: Route(cfg.exchange, cfg.work_routing_key),
        EVENT_DEAD_LETTERED: Route(cfg.dead_letter_exchange, EVENT_DEAD_LETTERED),
    }


def event_message(row: Any) -> EventMessage:
    """The message body an outbox row stands for: ids, type and version, never the payload."""
    payload = row["payload"] or {}
    return EventMessage(
        event_id=row["event_id"],
        event_type=row["event_type"],
        version=int(payload.get("v", 1)),
        job_id=row["job_id"],
    )


def publish_span(row: Any, via: str) -> Span:
    """The span of one event's publication, in its job's trace (ended by the caller)."""
    return tracer().start_span(
        SPAN_PUBLISH,
        context=context_of(row.get("traceparent")),
        kind=SpanKind.PRODUCER,
        attributes={
            "fenceline.job_id": str(row["job_id"]),
            "fenceline.event_id": str(row["event_id"]),
            "fenceline.event_type": row["event_type"],
            "fenceline.publish_attempt": row["publish_attempts"],
            "fenceline.via": via,
        },
    )


def outgoing(row: Any, route: Route, traceparent: str | None = None) -> Outgoing:
    """The publication of an outbox row along ``route``; a dead-letter event carries its
    reason in the same headers as the consumer's dead letters."""
    headers: dict[str, Any] = headers_with_context(
        {HEADER_SENT_AT: time.time_ns() // 1000}, traceparent or row.get("traceparent")
    )
    if row["event_type"] == EVENT_DEAD_LETTERED:
        payload = row["payload"] or {}
        headers[HEADER_REASON] = str(payload.get("reason") or "terminal")
        headers[HEADER_DETAIL] = str(payload.get("error_class") or "")
        headers[HEADER_SOURCE] = "outbox"
    return Outgoing(
        exchange=route.exchange,
        routing_key=route.routing_key,
        body=event_message(row).body(),
        message_id=str(row["event_id"]),
        message_type=row["event_type"],
        headers=headers,
    )
