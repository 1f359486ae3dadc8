"""A real PostgreSQL restart under load, on a server of the chaos run's own.

The run's whole database lives on a private server (``--private-postgres``:
:mod:`benchmarks.chaos.private_postgres`), so the ``pg_restart`` fault really
stops it (``pg_ctl -m fast stop``), keeps it down and starts it again while
invoices flow, without touching the machine's shared server. Around it: a
stalled driver that comes back with a stale result, an ERP outage that ends in
a lost acknowledgement, cut AMQP links and terminated backends (seed 17: the
restart comes fourth, at about 29 s, while invoices still arrive). Every actor,
the intake and the ERP receiver must reconnect, and the oracle must hold: nothing
lost, no ERP application twice, the late result recorded as stale and nothing
changed by it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from benchmarks.chaos.oracle import ClientLog
from benchmarks.chaos.run import ChaosOptions, ChaosResult, run_chaos
from benchmarks.chaos.schedule import FaultKind
from benchmarks.chaos.stack import Stack, StackConfig

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(400)]

KINDS = (
    FaultKind.PG_RESTART,
    FaultKind.DRIVER_STALL_PAST_LEASE,
    FaultKind.PG_TERMINATE,
    FaultKind.AMQP_CUT,
    FaultKind.ERP_DOWN_THEN_500,
)
INVOICES = 80

#: What each component did after the server last started (pg_postmaster_start_time()).
AFTER_RESTART = """
SELECT (SELECT pg_postmaster_start_time()) AS started,
       (SELECT count(*) FROM extraction_jobs WHERE created_at > s.t) AS jobs_accepted,
       (SELECT count(*) FROM outbox_events WHERE published_at > s.t) AS events_published,
       (SELECT count(*) FROM execution_inbox WHERE received_at > s.t) AS inbox_received,
       (SELECT count(*) FROM deliveries WHERE delivered_at > s.t) AS deliveries_delivered,
       (SELECT count(*) FROM admission_grants WHERE granted_at > s.t) AS grants,
       (SELECT count(*) FROM erp_postings WHERE accepted_at > s.t) AS erp_accepted
FROM (SELECT pg_postmaster_start_time() AS t) s
"""
ATTEMPTS_AFTER = """
SELECT worker_id, count(*) AS n FROM job_attempts
WHERE started_at > pg_postmaster_start_time() GROUP BY worker_id
"""


async def after_restart(stack: Stack, _clients: ClientLog) -> dict[str, Any]:
    """Per component, how much work it did after the restart; and the drivers' pids."""
    async with stack.pool.acquire() as conn:
        row = dict(await conn.fetchrow(AFTER_RESTART))
        attempts = {r["worker_id"]: r["n"] for r in await conn.fetch(ATTEMPTS_AFTER)}
    return {**row, "attempts": attempts, "workers": [d.worker_id for d in stack.drivers]}


@pytest.fixture(scope="module")
def restart_run() -> tuple[ChaosResult, float]:
    started = time.monotonic()
    opts = ChaosOptions(
        invoices=INVOICES,
        seed=17,
        kinds=KINDS,
        progress=False,
        stack=StackConfig(private_postgres=True),
        after_check=after_restart,
    )
    result = asyncio.run(run_chaos(opts))
    return result, time.monotonic() - started


def test_a_real_restart_of_a_private_server_under_load_keeps_every_invariant(
    restart_run: tuple[ChaosResult, float],
) -> None:
    result, seconds = restart_run
    m = result.metrics
    assert m["faults_not_triggered"] == [], [f.as_dict() for f in result.faults]
    restart = next(f for f in result.faults if f.kind == FaultKind.PG_RESTART)
    assert restart.triggered and "private server" in restart.detail, restart.detail
    # Invoices were arriving before and after the server went down.
    times = sorted(result.clients.accepted.values())
    assert times[0] < restart.start_s < restart.end_s < times[-1], (times[0], times[-1])
    assert m["accepted"] == INVOICES and m["rejected"] == {}
    assert result.drained, result.oracle.render()
    assert result.oracle.ok, result.oracle.render()
    assert result.oracle.lost == ()
    # The stalled driver came back and its result was refused and recorded as stale.
    assert m["late_results_discarded"] >= 1
    assert seconds < 180, f"the run took {seconds:.0f}s"


def test_every_component_worked_again_after_the_restart(
    restart_run: tuple[ChaosResult, float],
) -> None:
    """Intake, both drivers, admission, relay, inbox consumer, delivery and the ERP wrote
    after the server came back: their pools reconnected (no fault in this schedule
    kills a process, so none was restarted by Ray)."""
    result, _ = restart_run
    after = result.probe
    assert after["jobs_accepted"] >= 1, after  # the intake
    assert after["grants"] >= 1, after  # the admission actor's ledger
    assert after["events_published"] >= 1, after  # the outbox relay
    assert after["inbox_received"] >= 1, after  # the inbox consumer
    assert after["deliveries_delivered"] >= 1, after  # the delivery actor
    assert after["erp_accepted"] >= 1, after  # the ERP receiver
    for worker in after["workers"]:
        assert after["attempts"].get(worker, 0) >= 1, after


def test_the_run_used_its_own_server_not_the_shared_one(
    restart_run: tuple[ChaosResult, float],
) -> None:
    result, _ = restart_run
    stack = result.options.stack
    assert stack.private_postgres
    assert urlsplit(result.metrics["database_url"]).port != 5432
