"""One job's trace and logs, from acceptance to the ERP posting, across a crash and a 429.

The job is accepted, published through RabbitMQ and ingested; a driver claims it
and dies without a word (its lease expires, the reaper re-queues it under a new
fence); the next owner's call gets a provider 429 and persists a retry; the
third attempt succeeds, the completion event is published and the webhook is
delivered to the reference ERP receiver. Spans are collected in memory; every
step must be in the one trace the job row names, in order, with attempt and
fence attributes, and the structured log lines about the job must carry its ids.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import generate_invoice
from pipeline import tracing
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import JobStore, Lease, render_explain
from pipeline.logs import json_handler
from pipeline.messaging import BrokerMetrics, InboxConsumer, OutboxRelay
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.worker import AttemptRunner, WorkerConfig
from tests.support.amqp import topology
from tests.support.delivery import dispatcher_for, registry_for, reserve_receiver
from tests.support.drivers import answer_from_corpus, submit_corpus
from tests.support.jobs import new_tenant

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = json_handler(out)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def claim_when_due(store: JobStore, worker: str, timeout: float = 10.0) -> Lease:
    end = asyncio.get_running_loop().time() + timeout
    while True:
        leases = await store.claim(worker)
        if leases:
            return leases[0]
        if asyncio.get_running_loop().time() > end:
            raise TimeoutError("the job never became due")
        await asyncio.sleep(0.05)


def attr(span: ReadableSpan, name: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(name)


async def test_one_trace_from_acceptance_to_erp_across_a_crash_and_a_429(
    pool: asyncpg.Pool, dsn: str, spans: InMemorySpanExporter, log_lines: io.StringIO
) -> None:
    from pipeline.delivery import delivery_settle_hook

    policy = RetryPolicy(
        max_attempts=4, base_seconds=0.05, cap_seconds=0.2, next_attempt_margin_seconds=1
    )
    store = JobStore(pool, Settings(lease_seconds=30), policy=policy)
    store.settle_hooks.add(delivery_settle_hook)
    tenant = await new_tenant(pool)
    inv = generate_invoice(11, max_line_items=2, anchor=datetime.now(UTC).date())
    registry = registry_for(pool)
    receiver, _ = await reserve_receiver(dsn, registry, tenant)

    async with topology(dsn) as broker:
        metrics = BrokerMetrics(__import__("prometheus_client").CollectorRegistry())
        relay = OutboxRelay(pool, broker, metrics=metrics)
        inbox = InboxConsumer(pool, broker, metrics=metrics)
        # 1. acceptance → outbox → broker → inbox
        (job_id,) = list(await submit_corpus(store, tenant, [inv]))
        assert (await relay.run_once()).published == 1
        assert [r.job_id for r in await inbox.run_once()] == [job_id]

        # 2. a driver claims it and dies: the lease expires, the reaper re-queues it
        (crashed,) = await store.claim("driver-crashed", lease_seconds=0.3)
        await asyncio.sleep(0.4)
        assert (await store.reap()).rescheduled == [job_id]

        with FakeProvider(answer=answer_from_corpus([inv])) as fake:
            fake.set_faults({"script": [{"kind": "429", "count": 1, "retry_after": "1"}]})
            async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
                cfg = WorkerConfig(
                    worker_id="driver-b", max_output_tokens=2048, heartbeat_seconds=5
                )
                runner = AttemptRunner(store, engine, cfg)
                # 3. the next owner gets a 429: a persisted retry
                first = await runner.run(await claim_when_due(store, "driver-b"))
                assert first.outcome == "retry_scheduled"
                # 4. and then succeeds
                second = await runner.run(await claim_when_due(store, "driver-b"))
                assert second.outcome == "succeeded"
        # 5. the completion event goes out, the webhook reaches the ERP
        assert (await relay.run_once()).claimed == 1  # extraction.completed (handled locally)
        with receiver:
            dispatcher = dispatcher_for(pool)
            report = await dispatcher.run_once()
            await dispatcher.close()
        assert report.count("delivered") == 1
        await inbox.stop()
        await relay.stop()

    explained = await store.explain(job_id)
    traceparent = explained["job"]["traceparent"]
    trace_id = tracing.trace_id_of(traceparent)
    assert trace_id is not None
    assert f"trace {trace_id}" in render_explain(explained)

    finished = sorted(spans.get_finished_spans(), key=lambda s: s.start_time or 0)
    ours = [s for s in finished if f"{s.context.trace_id:032x}" == trace_id]
    # Every span of the run that names the job is in its trace, and nothing else is.
    assert {s.name for s in finished if attr(s, "fenceline.job_id") == str(job_id)} <= {
        s.name for s in ours
    }
    assert len({s.context.trace_id for s in ours}) == 1
    top = [s.name for s in ours if s.name not in _STEP_SPANS]
    assert top == [
        tracing.SPAN_ACCEPT,
        tracing.SPAN_PUBLISH,  # extraction.requested
        tracing.SPAN_INBOX,
        tracing.SPAN_REAP,  # the crashed driver's lease, re-queued
        tracing.SPAN_ATTEMPT,  # the 429
        tracing.SPAN_ATTEMPT,  # the success
        tracing.SPAN_PUBLISH,  # extraction.completed
        tracing.SPAN_DELIVERY,
    ]
    by_name: dict[str, list[ReadableSpan]] = {}
    for s in ours:
        by_name.setdefault(s.name, []).append(s)
    accept = by_name[tracing.SPAN_ACCEPT][0]
    assert accept.parent is None  # the job's trace starts at its acceptance
    ctx = accept.context
    assert traceparent.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")

    publish = by_name[tracing.SPAN_PUBLISH][0]
    inbox_span = by_name[tracing.SPAN_INBOX][0]
    assert inbox_span.parent is not None
    assert inbox_span.parent.span_id == publish.context.span_id  # through the message header

    reap = by_name[tracing.SPAN_REAP][0]
    assert (attr(reap, "fenceline.fence"), attr(reap, "fenceline.new_fence")) == (
        crashed.fence,
        crashed.fence + 1,
    )
    assert attr(reap, "fenceline.lost_owner") == "driver-crashed"
    assert attr(reap, "fenceline.timeout") == "lease"

    rate_limited, succeeded = by_name[tracing.SPAN_ATTEMPT]
    assert [
        (attr(a, "fenceline.attempt"), attr(a, "fenceline.fence"), attr(a, "fenceline.worker"))
        for a in (rate_limited, succeeded)
    ] == [(2, crashed.fence + 2, "driver-b"), (3, crashed.fence + 3, "driver-b")]
    for a in (rate_limited, succeeded, reap, inbox_span, publish):
        assert a.parent is not None
    for a in (rate_limited, succeeded, reap, publish, by_name[tracing.SPAN_DELIVERY][0]):
        assert a.parent is not None and a.parent.span_id == accept.context.span_id
    # The 429 attempt carries the retry decision and fails with the provider's reason.
    assert attr(rate_limited, "fenceline.retry.decision") == "RETRY_SCHEDULED"
    assert attr(rate_limited, "fenceline.retry.reason") == "rate_limited"
    assert attr(rate_limited, "fenceline.retry.at")
    assert rate_limited.status.status_code is StatusCode.ERROR
    assert attr(succeeded, "fenceline.outcome") == "succeeded"
    assert succeeded.status.status_code is not StatusCode.ERROR

    def steps(parent: ReadableSpan) -> list[str]:
        return [
            s.name
            for s in ours
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    assert steps(rate_limited) == [tracing.SPAN_ADMISSION, tracing.SPAN_ENGINE, tracing.SPAN_SETTLE]
    assert steps(succeeded) == [
        tracing.SPAN_ADMISSION,
        tracing.SPAN_ENGINE,
        tracing.SPAN_VALIDATE,
        tracing.SPAN_SETTLE,
    ]
    engines = by_name[tracing.SPAN_ENGINE]
    assert attr(engines[0], "fenceline.error_class") == "rate_limited"
    assert attr(engines[0], "fenceline.retry_after_seconds") == 1.0
    assert attr(engines[1], "gen_ai.usage.output_tokens") > 0
    assert attr(engines[1], "gen_ai.response.finish_reasons") == ("stop",)
    assert attr(engines[1], "fenceline.timeout_bound") == "attempt"
    (validate,) = by_name[tracing.SPAN_VALIDATE]
    assert attr(validate, "fenceline.decision") == "SUCCEEDED"
    settles = by_name[tracing.SPAN_SETTLE]
    assert [attr(s, "fenceline.state") for s in settles] == ["RETRY_SCHEDULED", "SUCCEEDED"]
    (delivery,) = by_name[tracing.SPAN_DELIVERY]
    assert attr(delivery, "http.response.status_code") == 200
    assert attr(delivery, "fenceline.outcome") == "delivered"

    # Structured logs: every line about the job carries its ids and its trace.
    lines = [json.loads(line) for line in log_lines.getvalue().splitlines() if line]
    about = [line for line in lines if line.get("job_id") == str(job_id)]
    assert {"reaper", "attempt", "delivery"} <= {_topic(line) for line in about}
    for line in about:
        assert line["trace_id"] == trace_id, line
        assert {"attempt", "fence"} <= line.keys(), line
    attempts = [line for line in about if line["logger"] == "pipeline.worker.attempt"]
    assert {(line["attempt"], line["fence"], line["tenant"]) for line in attempts} == {
        (2, crashed.fence + 2, str(tenant.id)),
        (3, crashed.fence + 3, str(tenant.id)),
    }
    # No line names the job without carrying its ids.
    for line in lines:
        if str(job_id) in line["message"]:
            assert line.get("job_id") == str(job_id), line
    assert uuid.UUID(str(job_id))


_STEP_SPANS = {
    tracing.SPAN_ADMISSION,
    tracing.SPAN_ENGINE,
    tracing.SPAN_VALIDATE,
    tracing.SPAN_SETTLE,
    tracing.SPAN_ROUTE,
}


def _topic(line: dict[str, Any]) -> str:
    logger = str(line["logger"])
    if "reap" in logger:
        return "reaper"
    if "attempt" in logger:
        return "attempt"
    if "delivery" in logger:
        return "delivery"
    return logger
