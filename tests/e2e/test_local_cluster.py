"""``fenceline up`` as a user runs it: the runtime app KubeRay deploys, on one machine.

The CLI starts its own Ray head and deploys the intake app and the runtime app
(:mod:`cluster.supervisor`) exactly as ``serveConfigV2`` names them; drivers call
an OpenAI-compatible provider (the fake one, a real HTTP server on loopback), so
no vLLM engine starts and the test stays short. Invoices go in over REST and must
settle as validation expects, done by the supervisor's named drivers; SIGTERM must
stop the cluster cleanly with no lease left behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.infra import free_port
from benchmarks.invoices.generator import generate_corpus
from pipeline.database import create_pool
from tests.support.drivers import answer_from_corpus, post_corpus, wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]


async def _wait_ready(url: str, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=5) as client:
        while True:
            assert proc.poll() is None, f"fenceline up exited with {proc.returncode}"
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "intake not ready in time"
            await asyncio.sleep(1)


async def test_fenceline_up_runs_the_supervised_runtime_and_stops_cleanly(
    dsn: str, tmp_path: Path
) -> None:
    corpus = generate_corpus(4, seed=41, max_line_items=4, anchor=datetime.now(UTC).date())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "FENCELINE_DATABASE_URL": dsn,
        "FENCELINE_REAPER_INTERVAL_SECONDS": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    log = tmp_path / "up.log"
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake, log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cluster.cli", "up", "--provider-url", fake.base_url,
             "--port", str(port), "--drivers", "2", "--concurrency", "2"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        pool = None
        try:
            await _wait_ready(url, proc, timeout=300)
            pool = await create_pool(dsn, min_size=1, max_size=4)
            await post_corpus(pool, url, corpus, prefix="up")
            rows = await wait_settled(pool, len(corpus), timeout=180)
            assert {r["state"] for r in rows} == {"SUCCEEDED"}
            async with pool.acquire() as conn:
                workers = {
                    r["worker_id"].rsplit("-", 1)[0]
                    for r in await conn.fetch("SELECT worker_id FROM job_attempts")
                }
            # The supervisor's named drivers did the work (worker id = actor name + run).
            assert workers <= {"fenceline-driver-0", "fenceline-driver-1"} and workers
            assert len(fake.calls()) == len(corpus)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if pool is not None:
                async with pool.acquire() as conn:
                    running = await conn.fetchval(
                        "SELECT count(*) FROM extraction_jobs WHERE state = 'RUNNING'"
                    )
                await pool.close()
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    assert "runtime app running" in out and "stopping" in out
    assert running == 0
