"""The intake warms its pool connections at start: the accept path, rolled back."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from pipeline.api.app import create_app
from pipeline.api.context import ApiContext
from pipeline.api.warm_up import warm_connection, warm_pool
from tests.support.api import settings_for

pytestmark = pytest.mark.integration

#: Every table an accept writes, and the tenants the warm-up creates.
COUNTS = (
    "SELECT (SELECT count(*) FROM tenants) AS tenants,"
    " (SELECT count(*) FROM documents) AS documents,"
    " (SELECT count(*) FROM extraction_jobs) AS jobs,"
    " (SELECT count(*) FROM outbox_events) AS events,"
    " (SELECT count(*) FROM job_events) AS audit"
)


async def test_startup_runs_the_accept_on_each_connection_and_leaves_nothing(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        before = dict((await conn.fetchrow(COUNTS)).items())
    woken: list[str] = []
    listener = await asyncpg.connect(dsn)
    await listener.add_listener("fenceline_runnable", lambda *args: woken.append(args[3]))
    app = create_app(settings_for(dsn, db_pool_min=3, db_pool_max=4))
    ctx: ApiContext = app.state.fenceline
    try:
        async with app.router.lifespan_context(app):
            services = ctx.services
            assert services.pool.get_size() == 3
            # Each connection ran intake_accept at start: the statement is prepared
            # in its session (asyncpg prepares once per connection and query).
            conns = [await services.pool.acquire() for _ in range(3)]
            try:
                prepared = [
                    await c.fetchval(
                        "SELECT count(*) FROM pg_prepared_statements"
                        " WHERE statement LIKE '%intake_accept(%'"
                        " AND statement NOT LIKE '%pg_prepared_statements%'"
                    )
                    for c in conns
                ]
            finally:
                for c in conns:
                    await services.pool.release(c)
            assert prepared == [1, 1, 1]
            assert await warm_pool(services.pool, services.intake, ctx.settings) == 3
        await asyncio.sleep(0.2)  # a NOTIFY of a committed job would have arrived
    finally:
        await listener.close()
    async with pool.acquire() as conn:
        after = dict((await conn.fetchrow(COUNTS)).items())
    assert after == before  # the tenant, document, job, events: all rolled back
    assert woken == []  # and no driver was woken for a job that never was


async def test_warming_answers_accepted_for_its_throwaway_tenant(
    dsn: str, pool: asyncpg.Pool
) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    services = app.state.fenceline.services
    async with pool.acquire() as conn:
        assert await warm_connection(services.intake, conn) == "accepted"
        assert await warm_connection(services.intake, conn) == "accepted"  # a new tenant each time
        assert not conn.is_in_transaction()


async def test_a_database_that_is_down_skips_the_warm_up_and_the_app_starts() -> None:
    settings = settings_for("postgresql://postgres@127.0.0.1:1/nowhere", db_pool_min=2)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        ctx: ApiContext = app.state.fenceline
        assert await warm_pool(ctx.services.pool, ctx.services.intake, settings) == 0
