"""The server's maintenance settings reach the operator as warnings."""

from __future__ import annotations

import asyncpg
import pytest

from pipeline.database import maintenance_warnings, server_warnings
from pipeline.jobs import setup_database
from pipeline.settings import Settings

pytestmark = pytest.mark.integration


def test_each_missing_maintenance_setting_is_named_with_its_remedy() -> None:
    assert maintenance_warnings(autovacuum=True, track_counts=True) == []
    (autovacuum,) = maintenance_warnings(autovacuum=False, track_counts=True)
    assert "autovacuum = off" in autovacuum and "ALTER SYSTEM SET autovacuum = on" in autovacuum
    (counts,) = maintenance_warnings(autovacuum=True, track_counts=False)
    assert "track_counts = off" in counts and "ALTER SYSTEM SET track_counts = on" in counts
    assert len(maintenance_warnings(autovacuum=False, track_counts=False)) == 2


async def test_the_server_settings_are_read_from_the_server(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        autovacuum = await conn.fetchval("SHOW autovacuum") == "on"
        assert await server_warnings(conn) == maintenance_warnings(
            autovacuum=autovacuum, track_counts=True
        )
        # track_counts can be turned off per session (a superuser's setting): the
        # warning follows what the session runs with.
        await conn.execute("SET track_counts = off")
        warned = await server_warnings(conn)
        await conn.execute("RESET track_counts")
    assert any("track_counts = off" in w for w in warned)


async def test_setup_reports_the_warnings_with_the_migrations(dsn: str) -> None:
    """`fenceline up`, `db migrate` and the demo print what setup_database returns."""
    setup = await setup_database(Settings(database_url=dsn))
    conn = await asyncpg.connect(dsn)
    try:
        autovacuum = await conn.fetchval("SHOW autovacuum") == "on"
    finally:
        await conn.close()
    assert setup.applied == []  # a database of the migrated template: up to date
    assert setup.warnings == maintenance_warnings(autovacuum=autovacuum, track_counts=True)
