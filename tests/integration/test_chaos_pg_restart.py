"""The chaos run's ``pg_restart`` fault, without restarting the shared server.

The fault's stop and start commands come from the stack's configuration; here
they only write to a file, so the test checks the plumbing (order, downtime,
the start-time probe that says whether the fault took effect) while the real
PostgreSQL keeps running for everyone else.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.chaos.faults import inject
from benchmarks.chaos.schedule import Fault, FaultKind
from benchmarks.chaos.stack import StackConfig

pytestmark = pytest.mark.integration


async def test_pg_restart_runs_stop_then_start_and_reports_no_effect_without_a_restart(
    dsn: str, tmp_path: Path
) -> None:
    log = tmp_path / "pg.log"
    cfg = StackConfig(
        pg_stop_command=f"echo stop $(date +%s.%N) >> {log}",
        pg_start_command=f"echo start $(date +%s.%N) >> {log}",
    )
    stack = SimpleNamespace(config=cfg, dsn=dsn)
    t0 = time.monotonic()
    record = await inject(stack, Fault(at=0.0, kind=FaultKind.PG_RESTART, duration=0.5), t0)  # type: ignore[arg-type]
    (stop, stopped_at), (start, started_at) = (
        line.split() for line in log.read_text().splitlines()
    )
    assert (stop, start) == ("stop", "start")
    assert float(started_at) - float(stopped_at) >= 0.5  # down for the fault's duration
    assert record.kind == "pg_restart" and record.end_s - record.start_s >= 0.5
    assert record.triggered is False  # the server's start time did not change: no restart
    assert "stop" in record.detail and "start" in record.detail


async def test_pg_restart_refuses_without_commands(dsn: str) -> None:
    stack = SimpleNamespace(config=StackConfig(), dsn=dsn)
    with pytest.raises(ValueError, match="pg_stop_command"):
        await inject(stack, Fault(0.0, FaultKind.PG_RESTART, 0.1), time.monotonic())  # type: ignore[arg-type]
