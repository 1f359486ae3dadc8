"""Provider budgets that ship (issue 46, item 6): ``fenceline up --provider-url … --rpm
--tpm`` as a user runs it, against the fake provider (a real HTTP server on loopback)
that enforces the same limits itself and answers 429 past them.

Two drivers, four jobs and one retry: five calls, of which the provider project allows
three a minute. The one admission actor of the provider scope must keep every
60-second window of calls at the RPM and under the TPM (the provider never refuses one
for its quota), and a 429 the provider sends anyway (scripted first, with Retry-After)
must hold every driver off for that long: only a call already on its way when the 429
came may arrive sooner. The TPM here is loose (a tight one is tested on the actor,
tests/unit/test_provider_budgets.py); it must reach the actor from the environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks.fake_provider import FakeProvider, FaultPlan, Step
from benchmarks.infra import free_port
from benchmarks.invoices.generator import generate_corpus
from pipeline.database import create_pool
from tests.e2e.test_local_cluster import _wait_ready
from tests.support.drivers import answer_from_corpus, post_corpus, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(900)]

RPM = 3
TPM = 200_000
RETRY_AFTER = 20.0


def _most_in_any_window(times: list[float], window: float) -> int:
    """The most calls any ``window`` seconds held, starting at some call."""
    return max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)


async def test_fenceline_up_keeps_the_provider_budgets_and_honours_429(
    dsn: str, tmp_path: Path
) -> None:
    corpus = generate_corpus(4, seed=46, max_line_items=2, anchor=datetime.now(UTC).date())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "FENCELINE_DATABASE_URL": dsn,
        "FENCELINE_REAPER_INTERVAL_SECONDS": "1",
        # The TPM from the environment, the RPM from the flag: both reach the actor.
        "FENCELINE_PROVIDER_TPM": str(TPM),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    log = tmp_path / "up.log"
    plan = FaultPlan(script=[Step(kind="429", retry_after=str(int(RETRY_AFTER)))], rpm=RPM, tpm=TPM)
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake, log.open("w") as sink:
        fake.set_faults(plan)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cluster.cli", "up", "--provider-url", fake.base_url,
             "--rpm", str(RPM), "--port", str(port), "--drivers", "2", "--concurrency", "1",
             "--fixed-drivers", "--no-console-key"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        pool = None
        try:
            await _wait_ready(url, proc, timeout=300)
            pool = await create_pool(dsn, min_size=1, max_size=4)
            await post_corpus(pool, url, corpus, prefix="budget")
            rows = await wait_settled(pool, len(corpus), timeout=420)
            assert {r["state"] for r in rows} == {"SUCCEEDED"}
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if pool is not None:
                await pool.close()
        calls = fake.calls()
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    [refused] = [c for c in calls if c.outcome.startswith("rate_limited")]
    assert (refused.seq, refused.outcome) == (1, "rate_limited"), [c.outcome for c in calls]
    answered = sorted(c.at for c in calls if c.outcome == "ok")
    assert len(answered) == len(corpus)
    # The 429's Retry-After held every driver off; only a call granted before the 429
    # was known (within a second of it) came sooner.
    later = [t for t in answered if t > refused.at + 1.0]
    assert later and min(later) >= refused.at + RETRY_AFTER - 0.5, (refused.at, answered)
    # Every call is a request slot, the refused one too: no 60 s holds more than RPM.
    every = sorted(c.at for c in calls)
    assert _most_in_any_window(every, 60.0) <= RPM
