"""The fenceline CLI against a real database (issue 2: safe migrations; explain)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import asyncpg
import pytest

from pipeline.jobs import JobStore
from tests.conftest import ADMIN_DSN, dsn_for
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


def fenceline(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FENCELINE_DATABASE_URL": dsn}
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_db_migrate_creates_database_and_is_idempotent() -> None:
    name = f"fl_cli_{uuid.uuid4().hex[:8]}"
    dsn = dsn_for(name)
    try:
        first = fenceline("db", "migrate", dsn=dsn)
        assert first.returncode == 0, first.stderr
        assert "migrations applied: [1" in first.stdout
        second = fenceline("db", "migrate", dsn=dsn)
        assert second.returncode == 0, second.stderr
        assert "none (up to date)" in second.stdout
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_explain_shows_every_attempt(pool: asyncpg.Pool, dsn: str) -> None:
    from pipeline.errors import ProviderTimeout

    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    first = (await store.claim("driver-a", lease_seconds=60))[0]
    await store.retry_or_fail(first, ProviderTimeout("attempt deadline"))
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = now() WHERE id=$1", job.job_id
        )
    second = (await store.claim("driver-b"))[0]
    await store.succeed(second, result={"ok": True})
    out = fenceline("explain", str(job.job_id), dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert "worker driver-a: retry_scheduled timeout" in out.stdout
    assert "worker driver-b: succeeded" in out.stdout
    assert re.search(r"READY\s+->\s+RUNNING", out.stdout)
    assert re.search(r"RUNNING\s+->\s+RETRY_SCHEDULED", out.stdout)
    missing = fenceline("explain", str(uuid.uuid4()), dsn=dsn)
    assert missing.returncode == 1
