"""The self-contained default: the demo's database path on an embedded PostgreSQL.

Nothing here stops or touches the machine's PostgreSQL: "nothing answers" is a
loopback port this test holds bound without listening (connections to it are
refused), and the embedded server lives in the test's own folder.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.demo.corpus import TENANTS, DemoOptions, corpus
from benchmarks.demo.provision import provision
from benchmarks.demo.run import create_demo_database, demo_settings
from cluster.embedded_postgres import answers, local_database, pgdata_dir, url_was_set
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.conftest import ADMIN_DSN
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A database URL on a loopback port that is bound (so no one else takes it) but
    not listening: a connection is refused, as on a machine without PostgreSQL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"postgresql://postgres@127.0.0.1:{sock.getsockname()[1]}/fenceline"


def unset(database_url: str, state_dir: Path) -> Settings:
    """Settings whose ``database_url`` is the default one, not set by the user."""
    return Settings.model_construct(
        _fields_set=set(), database_url=database_url, state_dir=state_dir
    )


def test_the_url_counts_as_set_from_the_environment_or_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FENCELINE_DATABASE_URL", raising=False)
    assert not url_was_set(Settings())
    assert url_was_set(Settings().model_copy(update={"database_url": ADMIN_DSN}))  # --database-url
    monkeypatch.setenv("FENCELINE_DATABASE_URL", ADMIN_DSN)
    assert url_was_set(Settings())


async def test_a_refusing_server_answers_and_a_silent_port_does_not(silent_url: str) -> None:
    assert await answers(ADMIN_DSN)
    # A server that refuses (no such database) is still a server: it is used, and its
    # own error tells the user what is wrong.
    assert await answers(ADMIN_DSN.rpartition("/")[0] + "/fl_no_such_database_h21")
    assert not await answers(silent_url, timeout=2.0)


def test_a_url_the_user_set_is_never_replaced(silent_url: str, tmp_path: Path) -> None:
    settings = Settings(database_url=silent_url, state_dir=tmp_path)
    said: list[str] = []
    with local_database(settings, say=said.append) as local:
        assert local is settings
    assert said == [] and not pgdata_dir(settings).exists()


def test_a_default_url_that_answers_is_used_as_it_is(tmp_path: Path) -> None:
    settings = unset(ADMIN_DSN, tmp_path)
    said: list[str] = []
    with local_database(settings, say=said.append) as local:
        assert local is settings
    assert said == [] and not pgdata_dir(settings).exists()


def test_the_demo_database_path_runs_on_an_embedded_server(silent_url: str, tmp_path: Path) -> None:
    settings = unset(silent_url, tmp_path / "state")
    said: list[str] = []
    with local_database(settings, say=said.append) as local:
        pgdata = pgdata_dir(settings).resolve()
        assert (pgdata / "PG_VERSION").is_file()
        (line,) = said
        assert "embedded PostgreSQL" in line and str(pgdata) in line and silent_url in line
        assert local.database_url != silent_url and "host=" in local.database_url
        assert local.database_url.partition("?")[0].endswith("/fenceline")
        demo = demo_settings(local)
        version, tenants, state = asyncio.run(_demo_database_path(demo))
        assert version.startswith("16")  # pgserver's PostgreSQL, not the machine's
        assert tenants == len(TENANTS)
        assert state == JobState.SUCCEEDED
    # The server stops with the block: nothing answers at its socket any more.
    assert not asyncio.run(answers(local.database_url, timeout=2.0))


async def _demo_database_path(demo: Settings) -> tuple[str, int, JobState]:
    """What the demo does to its database before the cluster starts, then one job's
    accept → claim → settle under the fence: the store's path the drivers take."""
    # The embedded server keeps its own statistics: nothing to warn about.
    assert await create_demo_database(demo) == []
    dsn = demo.database_url
    erp = demo.model_copy(update={"delivery_allowed_ports": (443, 9)})  # as the demo does
    await provision(erp, "http://127.0.0.1:9/webhooks/fenceline", corpus(DemoOptions(invoices=2)))
    pool = await create_pool(dsn, max_size=2)
    try:
        async with pool.acquire() as conn:
            version = str(await conn.fetchval("SHOW server_version"))
            tenants = int(await conn.fetchval("SELECT count(*) FROM tenants"))
        store = JobStore(pool, demo)
        tenant = await new_tenant(pool)
        accepted = await store.accept(request(tenant, key="embedded-1"))
        (lease,) = await store.claim("driver-embedded")
        assert lease.job_id == accepted.job_id
        settled = await store.succeed(lease, result={"total": "1.00"})
    finally:
        await pool.close()
    return version, tenants, settled.state
