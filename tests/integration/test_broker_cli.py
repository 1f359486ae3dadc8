"""``fenceline broker`` and ``fenceline dlq`` as an operator runs them (real services)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from pipeline.jobs import EVENT_REQUESTED, JobStore
from pipeline.settings import Settings
from tests.support.amqp import broker_settings, config, delete_topology, publish_raw, ready_count
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


def broker_env(settings: Settings) -> dict[str, str]:
    """The FENCELINE_* environment that names ``settings``' topology."""
    cfg = config(settings)
    return {
        "FENCELINE_AMQP_URL": cfg.url,
        "FENCELINE_AMQP_EXCHANGE": cfg.exchange,
        "FENCELINE_AMQP_WORK_QUEUE": cfg.work_queue,
        "FENCELINE_AMQP_DEAD_LETTER_EXCHANGE": cfg.dead_letter_exchange,
        "FENCELINE_AMQP_DEAD_LETTER_QUEUE": cfg.dead_letter_queue,
    }


def fenceline(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
async def undeclared(dsn: str) -> AsyncIterator[Settings]:
    """Settings naming a topology nobody declared yet (deleted afterwards)."""
    settings = broker_settings(dsn)
    yield settings
    delete_topology(settings)


async def test_broker_setup_declares_the_topology_and_dlq_commands_work_end_to_end(
    pool: asyncpg.Pool, dsn: str, undeclared: Settings
) -> None:
    env = broker_env(undeclared)
    # A wrong URL in the environment: --database-url must win, pass-through commands too.
    env["FENCELINE_DATABASE_URL"] = "postgresql://postgres@127.0.0.1:5432/no_such_database"
    cfg = config(undeclared)

    setup = fenceline("broker", "setup", env=env)
    assert setup.returncode == 0, setup.stderr
    assert await ready_count(cfg.work_queue) == 0  # raises if the queue does not exist
    assert await ready_count(cfg.dead_letter_queue) == 0
    again = fenceline("broker", "setup", env=env)  # idempotent
    assert again.returncode == 0, again.stderr

    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = (await store.accept(request(tenant))).job_id
    body = json.dumps(
        {"event_id": str(uuid.uuid4()), "type": EVENT_REQUESTED, "version": 2, "job_id": str(job)}
    ).encode()
    await publish_raw(undeclared, body)  # a future message version: poison here

    # The inbox dead-letters it; `dlq archive` moves it into dead_letters.
    from pipeline.messaging import InboxConsumer

    inbox = InboxConsumer(pool, undeclared)
    await inbox.run_once()
    await inbox.stop()
    db = ["--database-url", dsn]
    archived = fenceline(*db, "dlq", "archive", env=env)
    assert archived.returncode == 0, archived.stderr
    assert json.loads(archived.stdout) == {"archived": 1}

    listed = fenceline(*db, "dlq", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "unknown_version" in listed.stdout and str(job) in listed.stdout
    async with pool.acquire() as conn:
        letter_id = await conn.fetchval("SELECT id FROM dead_letters")
    shown = fenceline("dlq", "show", str(letter_id), "--database-url", dsn, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "unknown_version" in shown.stdout

    replayed = fenceline(*db, "dlq", "replay", str(letter_id), "--by", "ops@example", env=env)
    assert replayed.returncode == 0, replayed.stderr
    async with pool.acquire() as conn:
        audit = await conn.fetchrow(
            "SELECT requested_by FROM dead_letter_replays WHERE dead_letter_id = $1", letter_id
        )
    assert audit is not None and audit["requested_by"] == "ops@example"

    missing = fenceline(*db, "dlq", "show", str(uuid.uuid4()), env=env)
    assert missing.returncode == 1 and "error:" in missing.stderr


def test_broker_setup_without_a_broker_says_so() -> None:
    result = fenceline("broker", "setup", env={"FENCELINE_AMQP_URL": ""})
    assert result.returncode == 2
    assert "FENCELINE_AMQP_URL" in result.stderr
