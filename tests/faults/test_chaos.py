"""The chaos scenario in CI: 200 invoices from REST intake to the ERP under every fault kind.

The run (``benchmarks.chaos``) stands up the real processes — intake API,
RabbitMQ through a TCP proxy, Ray drivers with the admission, delivery and
maintenance actors, the fake provider and the reference ERP receiver — and does
one fault of every kind but the real broker restart (other tests share the
broker; the proxy cuts the AMQP links instead). The oracle must find every
invariant holding. Then, on the same final state, one SUCCEEDED job reaches the
ERP under a second delivery id, and the oracle must report exactly that job.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from benchmarks.chaos.oracle import AdmissionBudget, ClientLog, OracleReport, check
from benchmarks.chaos.run import ChaosOptions, ChaosResult, run_chaos
from benchmarks.chaos.schedule import CI_KINDS, FaultKind
from benchmarks.chaos.stack import Stack
from benchmarks.erp_receiver import apply_posting
from pipeline.queries import q

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(600)]
LEDGER = "default"


async def second_erp_application(stack: Stack, clients: ClientLog) -> tuple[str, OracleReport]:
    """Post one SUCCEEDED job to the ERP again under a new delivery id, then ask the oracle."""
    async with stack.pool.acquire() as conn:
        job = await conn.fetchval(
            "SELECT id FROM extraction_jobs WHERE state = 'SUCCEEDED' ORDER BY id LIMIT 1"
        )
        async with conn.transaction():
            await conn.fetchval(
                q("erp_inbox_insert_if_new"), LEDGER, "msg_resent_as_new", "0" * 64,
                "extraction.completed.v1", job,
            )  # fmt: skip
            await conn.fetchval(  # no invoice key: a job posted twice is what is injected
                q("erp_posting_insert_if_new"), LEDGER, job, "msg_resent_as_new", {}, None
            )
        await apply_posting(conn, LEDGER, "msg_resent_as_new")
        budget = AdmissionBudget(stack.scope, stack.config.rpm, stack.config.tpm)
        return str(job), await check(conn, clients, admission=budget)


@pytest.fixture(scope="module")
def chaos_run() -> tuple[ChaosResult, float]:
    started = time.monotonic()
    opts = ChaosOptions(invoices=200, seed=17, progress=False, after_check=second_erp_application)
    result = asyncio.run(run_chaos(opts))
    return result, time.monotonic() - started


def test_every_invariant_holds_under_every_fault_kind(chaos_run: tuple[ChaosResult, float]) -> None:
    result, seconds = chaos_run
    m = result.metrics
    assert set(m["faults_per_kind"]) == {str(k) for k in CI_KINDS}
    assert str(FaultKind.RABBITMQ_RESTART) not in m["faults_per_kind"]
    # Every fault took effect: each crash point was reached by real work.
    assert m["faults_not_triggered"] == [], m["faults_not_triggered"]
    assert m["accepted"] == 200 and m["rejected"] == {}
    assert result.drained, result.oracle.render()
    assert result.oracle.ok, result.oracle.render()
    assert result.oracle.lost == ()
    assert result.oracle.states.get("SUCCEEDED", 0) >= 190, result.oracle.states
    # The faults did something the oracle had to judge.
    assert m["uncertain_attempts"] >= 1
    assert m["retries_per_job"]["jobs_retried"] >= 1
    assert seconds < 300, f"the chaos run took {seconds:.0f}s"


def test_a_second_erp_application_is_reported(chaos_run: tuple[ChaosResult, float]) -> None:
    result, _ = chaos_run
    job, broken = result.probe
    erp = broken.verdict("erp_once")
    assert erp.offenders == (job,)
    assert "2 applications" in erp.detail[0]
    failing: list[Any] = [v.name for v in broken.verdicts if not v.ok]
    assert failing == ["erp_once"]
    assert not broken.ok
