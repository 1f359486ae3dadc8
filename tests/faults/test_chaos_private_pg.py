"""A real PostgreSQL restart under load, on a server of the chaos run's own.

The run's whole database lives on a private server (``--private-postgres``:
:mod:`benchmarks.chaos.private_postgres`), so the ``pg_restart`` fault really
stops it (``pg_ctl -m fast stop``), keeps it down and starts it again while
invoices flow, without touching the machine's shared server. Around it: a
stalled driver that comes back with a stale result, a driver kill, terminated
backends and cut AMQP links. Every actor, the intake and the ERP receiver must
reconnect, and the oracle must hold: nothing lost, no ERP application twice, the
late result recorded as stale and nothing changed by it.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pytest

from benchmarks.chaos.run import ChaosOptions, ChaosResult, run_chaos
from benchmarks.chaos.schedule import FaultKind
from benchmarks.chaos.stack import StackConfig

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(400)]

KINDS = (
    FaultKind.PG_RESTART,
    FaultKind.DRIVER_STALL_PAST_LEASE,
    FaultKind.DRIVER_KILL_MID_CALL,
    FaultKind.PG_TERMINATE,
    FaultKind.AMQP_CUT,
)
INVOICES = 80


@pytest.fixture(scope="module")
def restart_run() -> tuple[ChaosResult, float]:
    started = time.monotonic()
    opts = ChaosOptions(
        invoices=INVOICES,
        seed=17,
        kinds=KINDS,
        progress=False,
        stack=StackConfig(private_postgres=True),
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


def test_the_run_used_its_own_server_not_the_shared_one(
    restart_run: tuple[ChaosResult, float],
) -> None:
    result, _ = restart_run
    stack = result.options.stack
    assert stack.private_postgres
    assert urlsplit(result.metrics["database_url"]).port != 5432
