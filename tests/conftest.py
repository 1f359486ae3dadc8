"""Shared fixtures: real PostgreSQL (a template database built once from the
migrations, cloned per test module) and a clock tests can move.

A missing PostgreSQL is an error, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import asyncpg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.erp_receiver import migrate_erp
from pipeline import tracing
from pipeline.database import connect, create_pool, migrate

ADMIN_DSN = os.environ.get(
    "FENCELINE_TEST_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def dsn_for(database: str) -> str:
    base, _, _ = ADMIN_DSN.rpartition("/")
    return f"{base}/{database}"


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(ADMIN_DSN)
    except (OSError, asyncpg.PostgresError) as exc:  # pragma: no cover - environment
        raise RuntimeError(
            f"PostgreSQL is required for the tests and is not reachable at {ADMIN_DSN}: {exc}"
        ) from exc


@pytest.fixture(scope="session")
async def template_db() -> AsyncIterator[str]:
    """A database with every migration applied (the product's and the reference ERP
    receiver's), used as CREATE DATABASE template."""
    name = f"fl_tmpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = await _admin()
    await admin.execute(f'CREATE DATABASE "{name}"')
    conn = await connect(dsn_for(name))
    await migrate(conn)
    await migrate_erp(conn)  # the reference ERP receiver's tables (sql/erp)
    await conn.close()
    yield name
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


DatabaseFactory = Callable[[], Awaitable[str]]


@pytest.fixture(scope="session")
async def make_database(template_db: str) -> AsyncIterator[DatabaseFactory]:
    """Factory returning the DSN of a fresh clone of the template database."""
    created: list[str] = []
    admin = await _admin()

    async def factory() -> str:
        name = f"fl_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        created.append(name)
        return dsn_for(name)

    yield factory
    for name in created:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


@pytest.fixture(scope="module")
async def module_dsn(make_database: DatabaseFactory) -> str:
    """One cloned database per test module."""
    return await make_database()


@pytest.fixture
async def dsn(make_database: DatabaseFactory) -> str:
    """One cloned database per test, for tests that count rows globally."""
    return await make_database()


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(dsn, min_size=1, max_size=20)
    yield p
    await p.close()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span the pipeline finishes during the test, kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)
        provider.shutdown()
