"""`fenceline review` decides a REVIEW_REQUIRED job through the audited, tenant-scoped API."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.jobs import JobStore
from pipeline.states import JobState
from tests.support.api import tenant_with_key, threaded_server
from tests.support.jobs import request

pytestmark = pytest.mark.integration


def review(url: str, key: str, job_id: str, decision: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.cli",
            "review",
            job_id,
            decision,
            "--note",
            "checked",
            "--url",
            url,
            "--api-key",
            key,
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_review_cli_approves_once_and_is_tenant_scoped(pool: asyncpg.Pool, dsn: str) -> None:
    from pipeline.settings import Settings

    store = JobStore(pool)
    owner = await tenant_with_key(pool, scopes=("jobs", "review"))
    other = await tenant_with_key(pool, scopes=("jobs", "review"))
    job = await store.accept(request(owner.tenant))
    lease = (await store.claim("w"))[0]
    await store.succeed(
        lease,
        result={"x": 1},
        decision=JobState.REVIEW_REQUIRED,
        validation={"reasons": [{"code": "iban_not_in_text"}]},
    )
    with threaded_server(lambda: create_app(Settings(database_url=dsn))) as url:
        foreign = await asyncio.to_thread(review, url, other.key, str(job.job_id), "approve")
        assert foreign.returncode == 1 and "404" in foreign.stderr
        done = await asyncio.to_thread(review, url, owner.key, str(job.job_id), "approve")
        assert done.returncode == 0, done.stdout + done.stderr
        again = await asyncio.to_thread(review, url, owner.key, str(job.job_id), "reject")
        assert again.returncode == 1  # no longer awaiting review
    row = await store.get(owner.tenant.id, job.job_id)
    assert row["state"] == "SUCCEEDED"
    async with pool.acquire() as conn:
        audits = await conn.fetchval(
            "SELECT count(*) FROM review_decisions WHERE job_id = $1", job.job_id
        )
    assert audits == 1
