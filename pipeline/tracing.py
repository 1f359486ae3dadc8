"""One OpenTelemetry trace per job, carried in durable state rather than in memory.

The spec asks that a job's acceptance, publication, ingestion, every attempt
and every delivery be correlated, and that a trace say which timeout fired
first. A job outlives the process that accepted it, the driver that crashed
with it and the relay that published it, so its context is a W3C
``traceparent`` string written where the job goes: the job row
(``extraction_jobs.traceparent``), each outbox event and each broker message's
headers. Every later span is started as a child of that string, so a retry on
another driver, the reaper's re-queue and the webhook sent days later share
the acceptance span's trace id.

Export is off unless ``Settings.otlp_endpoint`` is set; the API's no-op tracer
then costs nothing. A job still gets a trace id at acceptance (random, like an
SDK's), so logs and ``fenceline explain`` name one whether or not spans are
exported. Attributes carry job ids; metric labels never do.

Tests install an SDK provider with :func:`install` (an in-memory exporter)
instead of the process-global one, so parallel tests never share spans.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pipeline.settings import Settings

log = logging.getLogger(__name__)

TRACER_NAME = "fenceline"
#: The header (and column) name of the carried context.
TRACEPARENT = "traceparent"

#: Span names, one per step of a job's life (docs/observability.md lists them).
SPAN_ACCEPT = "job.accept"
SPAN_PUBLISH = "outbox.publish"
SPAN_INBOX = "inbox.record"
SPAN_ATTEMPT = "job.attempt"
SPAN_ADMISSION = "admission.wait"
SPAN_DOCUMENT = "document.read"
SPAN_ROUTE = "router.choose"
SPAN_ENGINE = "engine.call"
SPAN_VALIDATE = "extraction.validate"
SPAN_SETTLE = "job.settle"
SPAN_REAP = "job.reap"
SPAN_DELIVERY = "delivery.attempt"

#: Which bound ended an engine call early (the ``fenceline.timeout`` attribute and
#: the span status' description): the attempt's own timeout, the job's deadline,
#: the lease (heartbeats could not renew it in time), or the provider's answer.
TIMEOUTS = ("attempt", "deadline", "lease", "provider")

_propagator = TraceContextTextMapPropagator()
_installed: trace.TracerProvider | None = None


def install(provider: trace.TracerProvider | None) -> None:
    """Use ``provider`` for Fenceline's spans in this process (``None``: the global one).

    Tests install an SDK provider with an in-memory exporter; services call
    :func:`configure_tracing` instead.
    """
    global _installed
    _installed = provider


def tracer() -> Tracer:
    """The tracer every Fenceline span is started from."""
    provider = _installed if _installed is not None else trace.get_tracer_provider()
    return provider.get_tracer(TRACER_NAME)


def configure_tracing(settings: Settings, service: str) -> bool:
    """Export spans over OTLP when ``settings.otlp_endpoint`` is set; returns whether on.

    Called once per process at service start (intake replica, driver, delivery,
    maintenance). ``otlp_protocol`` picks gRPC (port 4317) or HTTP/protobuf (4318).
    """
    if not settings.otlp_endpoint or _installed is not None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    exporter: SpanExporter
    if settings.otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint, insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        exporter = HttpExporter(endpoint=settings.otlp_endpoint.rstrip("/") + "/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    log.info("tracing: %s exports spans to %s", service, settings.otlp_endpoint)
    return True


# ----------------------------------------------------------------- the context
def new_traceparent() -> str:
    """A fresh sampled root context (used when no span is recording)."""
    return _traceparent(*_random_ids())


def _random_ids() -> tuple[int, int]:
    """A trace id and a span id, random and never zero (zero is invalid in W3C)."""
    return secrets.randbits(128) or 1, secrets.randbits(64) or 1


def _traceparent(trace_id: int, span_id: int) -> str:
    """The W3C ``traceparent`` of a sampled context with these ids."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def current_traceparent() -> str | None:
    """The current span's context as a W3C ``traceparent`` (``None`` without one)."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get(TRACEPARENT)


def traceparent_of(span: Span) -> str | None:
    """``span``'s own context as a W3C ``traceparent``."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get(TRACEPARENT)


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a stored ``traceparent`` names (``None``: none or malformed)."""
    if not traceparent:
        return None
    ctx = _propagator.extract({TRACEPARENT: traceparent})
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a ``traceparent`` (what a tracing UI searches for)."""
    ctx = context_of(traceparent)
    if ctx is None:
        return None
    return f"{trace.get_current_span(ctx).get_span_context().trace_id:032x}"


def headers_with_context(headers: Mapping[str, Any], traceparent: str | None) -> dict[str, Any]:
    """``headers`` plus the ``traceparent`` a consumer continues the trace from."""
    out = dict(headers)
    if traceparent:
        out[TRACEPARENT] = traceparent
    return out


def context_from_headers(headers: Mapping[str, Any] | None) -> str | None:
    """The ``traceparent`` a message carries, if any."""
    if not headers:
        return None
    value = headers.get(TRACEPARENT)
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------- the spans
@contextlib.contextmanager
def job_span(
    name: str,
    traceparent: str | None,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[Span]:
    """A span in the trace ``traceparent`` names, current for the ``with`` body.

    Without a (valid) stored context the span continues the current one, so a
    step that runs inside an attempt nests under it. An exception leaving the
    body marks the span as failed and is re-raised.
    """
    parent = context_of(traceparent)
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer().start_as_current_span(
        name, context=parent, kind=kind, attributes=attrs, record_exception=True
    ) as span:
        if not span.get_span_context().is_valid and parent is not None:
            # No SDK in this process: keep the job's ids current for the logs.
            with _current(NonRecordingSpan(trace.get_current_span(parent).get_span_context())):
                yield trace.get_current_span()
        else:
            yield span


@contextlib.contextmanager
def root_span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[tuple[Span, str]]:
    """A new trace's first span and its ``traceparent`` (what the job row stores).

    Always a root: a job's trace starts at its acceptance, whatever the caller
    was doing. Without an SDK the ids are made up here and made current, so the
    job still has a trace id for its logs and ``explain``.
    """
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer().start_as_current_span(
        name,
        context=otel_context.Context(),
        kind=SpanKind.SERVER,
        attributes=attrs,
        record_exception=True,
    ) as span:
        if span.get_span_context().is_valid:
            yield span, traceparent_of(span) or new_traceparent()
            return
        trace_id, span_id = _random_ids()
        made = _traceparent(trace_id, span_id)
        stand_in = NonRecordingSpan(
            SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))
        )
        with _current(stand_in):
            yield stand_in, made


@contextlib.contextmanager
def child_span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """A span under the current one (inside an attempt or a delivery)."""
    with job_span(name, None, attributes) as span:
        yield span


@contextlib.contextmanager
def _current(span: Span) -> Iterator[None]:
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


def root_span_context(traceparent: str) -> SpanContext:
    """The span context a ``traceparent`` names (for links and tests)."""
    ctx = context_of(traceparent)
    if ctx is None:
        raise ValueError(f"not a traceparent: {traceparent!r}")
    return trace.get_current_span(ctx).get_span_context()


def set_timeout(span: Span, which: str, detail: str = "") -> None:
    """Mark ``span`` as ended by a timeout and say which one fired (see :data:`TIMEOUTS`)."""
    span.set_attribute("fenceline.timeout", which)
    span.set_status(
        Status(StatusCode.ERROR, f"timeout: {which}" + (f" ({detail})" if detail else ""))
    )


def set_error(span: Span, error_class: str, detail: str = "") -> None:
    """Mark ``span`` as failed with Fenceline's error class."""
    span.set_attribute("fenceline.error_class", error_class)
    span.set_status(Status(StatusCode.ERROR, f"{error_class}: {detail}"[:500]))


def current_trace_id() -> str | None:
    """The current span's trace id (32 hex), for log lines."""
    sc = trace.get_current_span().get_span_context()
    return f"{sc.trace_id:032x}" if sc.is_valid else None


__all__ = [
    "SPAN_ACCEPT",
    "SPAN_ADMISSION",
    "SPAN_ATTEMPT",
    "SPAN_DELIVERY",
    "SPAN_DOCUMENT",
    "SPAN_ENGINE",
    "SPAN_INBOX",
    "SPAN_PUBLISH",
    "SPAN_REAP",
    "SPAN_ROUTE",
    "SPAN_SETTLE",
    "SPAN_VALIDATE",
    "TIMEOUTS",
    "TRACEPARENT",
    "Span",
    "SpanKind",
    "TraceFlags",
    "child_span",
    "configure_tracing",
    "context_from_headers",
    "context_of",
    "current_trace_id",
    "current_traceparent",
    "headers_with_context",
    "install",
    "job_span",
    "new_traceparent",
    "root_span",
    "set_error",
    "set_timeout",
    "trace_id_of",
    "traceparent_of",
    "tracer",
]
