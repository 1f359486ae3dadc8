"""Releasing a pooled connection (``pipeline.database.PooledConnection``).

A release costs no round trip unless the session listened; one that listened
is reset in full, and an open transaction is always rolled back.
"""

from __future__ import annotations

import asyncpg
import pytest

from pipeline.database import create_pool

pytestmark = pytest.mark.integration


class Log:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        self.queries.append(record.query)


async def test_a_plain_release_sends_nothing_and_a_listening_one_is_reset(dsn: str) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=1)
    log = Log()
    try:
        async with pool.acquire() as conn:
            conn.add_query_logger(log)
            await conn.fetchval("SELECT 1")
        assert log.queries == ["SELECT 1"]  # no reset query on release

        # Released while still listening (asyncpg warns): the reset must end it.
        with pytest.warns(asyncpg.exceptions.InterfaceWarning, match="notification listener"):
            async with pool.acquire() as conn:
                await conn.add_listener("fenceline_test", lambda *_: None)
                listening = await conn.fetchval("SELECT count(*) FROM pg_listening_channels()")
        assert listening == 1
        assert any("UNLISTEN" in query for query in log.queries)

        log.queries.clear()
        async with pool.acquire() as conn:
            # The same server session (max_size 1): it listens to nothing any more,
            # and the next plain release is free again.
            assert await conn.fetchval("SELECT count(*) FROM pg_listening_channels()") == 0
        assert not any("UNLISTEN" in query for query in log.queries)
    finally:
        await pool.close()


async def test_an_open_transaction_is_rolled_back_on_release(dsn: str) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE pool_reset_probe (x int)")
            tx = conn.transaction()
            await tx.start()
            await conn.execute("INSERT INTO pool_reset_probe VALUES (1)")
            # released without commit or rollback
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM pool_reset_probe") == 0
    finally:
        await pool.close()
