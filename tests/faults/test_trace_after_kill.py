"""A job's trace goes on after its driver process is SIGKILLed mid-call.

A driver in a child process claims the job and is killed inside its provider
call; its attempt span never ends, so it is never exported. The reaper's
re-queue and the next owner's attempt (here, in the test process with spans in
memory) are in the trace the job row names, parented by the acceptance span,
because they continue the stored ``traceparent``, not anything of the dead
process. The in-process version with a 429 and the ERP delivery is
tests/integration/test_tracing.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import generate_invoice
from pipeline import tracing
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.worker import AttemptRunner, WorkerConfig
from tests.support.drivers import answer_from_corpus, submit_corpus
from tests.support.jobs import new_tenant

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0


async def line_from(child: subprocess.Popen[str], prefix: str, timeout: float = 60) -> str:
    assert child.stdout is not None
    stdout = child.stdout

    async def read() -> str:
        while True:
            line = await asyncio.to_thread(stdout.readline)
            if not line:
                raise AssertionError(f"child exited ({child.poll()}) before {prefix}")
            if line.startswith(prefix):
                return line.strip()

    return await asyncio.wait_for(read(), timeout)


def attr(span: ReadableSpan, name: str) -> object:
    return (span.attributes or {}).get(name)


async def test_the_trace_continues_after_the_driver_process_is_killed(
    pool: asyncpg.Pool, dsn: str, spans: InMemorySpanExporter
) -> None:
    store = JobStore(
        pool,
        Settings(lease_seconds=30),  # the next owner's; the child claims with LEASE
        policy=RetryPolicy(base_seconds=0.05, cap_seconds=0.1, next_attempt_margin_seconds=1),
    )
    tenant = await new_tenant(pool)
    inv = generate_invoice(21, max_line_items=1, anchor=datetime.now(UTC).date())
    (job_id,) = list(await submit_corpus(store, tenant, [inv]))
    with FakeProvider(answer=answer_from_corpus([inv])) as fake:
        fake.set_faults({"latency": {"dist": "fixed", "a": 60.0}})  # the child never gets one
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.attempt_child", dsn, fake.base_url,
             "driver-killed", str(LEASE)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            claimed = (await line_from(child, "CLAIMED")).split()
            assert claimed[1] == str(job_id)
            killed_fence = int(claimed[2])
            # The child is inside its attempt: its heartbeats (every 0.5 s, only while the
            # attempt runs) move the lease on; the provider holds the call for 60 s.
            sql = (
                "SELECT state, lease_owner, lease_until, traceparent FROM extraction_jobs"
                " WHERE id = $1"
            )
            async with pool.acquire() as conn:
                first = await conn.fetchrow(sql, job_id)
                await asyncio.sleep(1.5)
                row = await conn.fetchrow(sql, job_id)
            assert (row["state"], row["lease_owner"]) == ("RUNNING", "driver-killed")
            assert row["lease_until"] > first["lease_until"], "no heartbeat: not in its attempt"
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)

        # The lease runs out (no heartbeat from a dead process); the reaper re-queues it.
        deadline = asyncio.get_running_loop().time() + LEASE * 6
        while not (await store.reap()).rescheduled:
            assert asyncio.get_running_loop().time() < deadline, "never reaped"
            await asyncio.sleep(0.2)
        fake.set_faults({})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            cfg = WorkerConfig(worker_id="driver-next", max_output_tokens=2048)
            runner = AttemptRunner(store, engine, cfg)
            leases = await store.claim("driver-next")
            while not leases:  # due after the reaper's short backoff
                assert asyncio.get_running_loop().time() < deadline + 10, "never due"
                await asyncio.sleep(0.05)
                leases = await store.claim("driver-next")
            (lease,) = leases
            result = await runner.run(lease)
            assert result.outcome == "succeeded", result

    trace_id = tracing.trace_id_of(row["traceparent"])
    finished = spans.get_finished_spans()
    ours = [s for s in finished if f"{s.context.trace_id:032x}" == trace_id]
    top = [
        s for s in ours if s.name in (tracing.SPAN_ACCEPT, tracing.SPAN_REAP, tracing.SPAN_ATTEMPT)
    ]
    assert [s.name for s in sorted(top, key=lambda s: s.start_time or 0)] == [
        tracing.SPAN_ACCEPT,
        tracing.SPAN_REAP,  # the killed driver's attempt span is gone with its process
        tracing.SPAN_ATTEMPT,
    ]
    accept, reap, attempt = sorted(top, key=lambda s: s.start_time or 0)
    for span in (reap, attempt):
        assert span.parent is not None and span.parent.span_id == accept.context.span_id
    assert attr(reap, "fenceline.lost_owner") == "driver-killed"
    assert (attr(reap, "fenceline.fence"), attr(reap, "fenceline.new_fence")) == (
        killed_fence,
        killed_fence + 1,
    )
    assert attr(reap, "fenceline.timeout") == "lease"
    assert (attr(attempt, "fenceline.worker"), attr(attempt, "fenceline.fence")) == (
        "driver-next",
        killed_fence + 2,
    )
    assert attr(attempt, "fenceline.attempt") == 2
    # Every span the test process made about the job is in that one trace.
    assert all(
        f"{s.context.trace_id:032x}" == trace_id
        for s in finished
        if attr(s, "fenceline.job_id") == str(job_id)
    )
