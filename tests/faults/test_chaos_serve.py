"""The chaos scenario through the deployed Serve stack: 200 invoices, every fault kind.

The same run as ``test_chaos.py``, but on what ``fenceline up`` deploys
(``benchmarks/chaos/serve_stack.py``): submissions go through Serve's HTTP proxy
to the intake ingress, and the runtime supervisor app creates the admission,
delivery and maintenance actors and the autoscaled task drivers. The faults find
those actors by name; after a kill the harness only waits — Ray restarts the
process and the supervisor's health check calls ``start()`` on it. The oracle
must find every invariant holding, every kill must have been restarted by the
supervisor, and a second ERP application injected afterwards must be reported.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from benchmarks.chaos.report import summarise
from benchmarks.chaos.run import ChaosOptions, ChaosResult, run_chaos
from benchmarks.chaos.schedule import CI_KINDS, FaultKind
from benchmarks.chaos.serve_stack import KILL_KINDS, ServeOptions
from tests.faults.test_chaos import second_erp_application

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def serve_run() -> tuple[ChaosResult, float]:
    started = time.monotonic()
    opts = ChaosOptions(
        invoices=200,
        seed=17,
        progress=False,
        serve=ServeOptions(),
        after_check=second_erp_application,
    )
    result = asyncio.run(run_chaos(opts))
    seconds = time.monotonic() - started
    print(summarise(result.as_dict(), result.oracle), f"\nrun took {seconds:.0f}s")  # -s
    return result, seconds


def test_every_invariant_holds_through_the_serve_stack(
    serve_run: tuple[ChaosResult, float],
) -> None:
    result, seconds = serve_run
    m = result.metrics
    assert result.as_dict()["stack_kind"] == "serve"
    assert set(m["faults_per_kind"]) == {str(k) for k in CI_KINDS}
    assert m["faults_not_triggered"] == [], m["faults_not_triggered"]
    assert m["accepted"] == 200 and m["rejected"] == {}
    assert result.drained, result.oracle.render()
    assert result.oracle.ok, result.oracle.render()
    assert result.oracle.lost == ()
    assert result.oracle.states.get("SUCCEEDED", 0) >= 190, result.oracle.states
    assert m["uncertain_attempts"] >= 1
    assert m["retries_per_job"]["jobs_retried"] >= 1
    assert seconds < 300, f"the serve chaos run took {seconds:.0f}s"


def test_the_supervisor_restarted_every_killed_actor(serve_run: tuple[ChaosResult, float]) -> None:
    result, _ = serve_run
    restarts = result.metrics["supervised"]["restarts"]
    kills = [f for f in result.faults if FaultKind(f.kind) in KILL_KINDS]
    assert len(restarts) == len(kills) == len(KILL_KINDS)
    for r in restarts:
        assert r["new_pid"] != r["old_pid"], r
        # started by the supervisor's health check (every 15 s), not by the harness
        assert r["supervisor_start_s"] is not None, r
        assert r["supervisor_start_s"] >= r["ray_restart_s"], r


def test_a_second_erp_application_is_reported_on_the_serve_stack(
    serve_run: tuple[ChaosResult, float],
) -> None:
    result, _ = serve_run
    job, broken = result.probe
    erp = broken.verdict("erp_once")
    assert erp.offenders == (job,)
    failing: list[Any] = [v.name for v in broken.verdicts if not v.ok]
    assert failing == ["erp_once"]
