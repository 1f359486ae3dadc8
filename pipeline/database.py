"""Connection pools, schema migrations and whole databases.

Migrations are the numbered files of ``sql/schema``. :func:`migrate` takes a
transaction-level advisory lock, so two processes running it at once apply
each file exactly once, and running it twice is a no-op.

:func:`create_database`, :func:`drop_database` and :func:`scratch_database` are
the one set-up helper for whole databases (the demo's, each benchmark run's).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from pipeline.errors import NotFound
from pipeline.queries import SQL_DIR, q

log = logging.getLogger(__name__)

SCHEMA_DIR = SQL_DIR / "schema"
#: Arbitrary constant naming the migration lock.
MIGRATION_LOCK_ID = 0x46454E43  # "FENC"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text()


def migrations(schema_dir: Path = SCHEMA_DIR) -> list[Migration]:
    """The numbered migrations in order; a duplicate number is an error."""
    out: dict[int, Migration] = {}
    for path in sorted(schema_dir.glob("*.sql")):
        head, _, rest = path.stem.partition("_")
        if not head.isdigit():
            raise ValueError(f"migration {path.name} must start with a number")
        version = int(head)
        if version in out:
            other = out[version].path.name
            raise ValueError(f"two migrations numbered {version}: {other}, {path.name}")
        out[version] = Migration(version, rest, path)
    return [out[v] for v in sorted(out)]


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(typ, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection with Fenceline's type codecs (jsonb ↔ Python objects)."""
    conn = await asyncpg.connect(dsn)
    await _init_connection(conn)
    return conn


class PooledConnection(asyncpg.Connection):  # type: ignore[misc]
    """A pooled connection whose release costs no round trip unless it must.

    asyncpg resets every connection it takes back with one more query (``CLOSE
    ALL; UNLISTEN *; RESET ALL; SELECT pg_advisory_unlock_all()``): a round trip
    per acquisition, 9.5 % of the intake's samples under load. Fenceline's SQL
    leaves none of that behind in a session (its advisory locks are
    transaction-scoped, it sets nothing session-wide and holds no cursor past a
    transaction), except ``LISTEN``. So the reset query runs only on a connection
    that listened; asyncpg still rolls back an open transaction and drops the
    listener callbacks of every connection it takes back.
    """

    _listened = False

    async def add_listener(self, channel: str, callback: Any) -> None:
        self._listened = True
        await super().add_listener(channel, callback)

    def get_reset_query(self) -> str:
        if not self._listened:
            return ""
        self._listened = False
        return str(super().get_reset_query())


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """A pool with Fenceline's type codecs (:class:`PooledConnection`)."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        connection_class=PooledConnection,
    )
    assert pool is not None
    return pool


async def fetch_owned(
    conn: asyncpg.Connection, query: str, row_id: uuid.UUID, tenant_id: uuid.UUID, what: str
) -> asyncpg.Record:
    """The row the named ``query`` finds for ``(row_id, tenant_id)``.

    Raises:
        NotFound: ``"{what} {row_id}"``, when the tenant has no such row (another
            tenant's row is not found either).
    """
    row = await conn.fetchrow(q(query), row_id, tenant_id)
    if row is None:
        raise NotFound(f"{what} {row_id}")
    return row


async def fetch_dicts(pool: asyncpg.Pool, query: str, *args: Any) -> list[dict[str, Any]]:
    """The rows of the named ``query`` with ``args``, each as a dict, on a pooled connection."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(q(query), *args)
    return [dict(r.items()) for r in rows]


async def migrate(conn: asyncpg.Connection, schema_dir: Path = SCHEMA_DIR) -> list[int]:
    """Apply pending migrations; return the versions applied by this call."""
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute(q("migration_lock"), MIGRATION_LOCK_ID)
        await conn.execute(q("migration_table_create"))
        done = {r["version"] for r in await conn.fetch(q("migration_list"))}
        for m in migrations(schema_dir):
            if m.version in done:
                continue
            log.info("applying migration %03d %s", m.version, m.name)
            await conn.execute(m.sql)
            await conn.execute(q("migration_record"), m.version, m.name)
            applied.append(m.version)
    return applied


def maintenance_warnings(*, autovacuum: bool, track_counts: bool) -> list[str]:
    """What an operator should hear about a server with these maintenance settings.

    Without autovacuum nothing refreshes the planner's statistics or removes dead
    rows: every pooled connection keeps the plans it cached while the tables were
    small (docs/postgresql.md), and the job, outbox and backlog tables, updated on
    every accept and settle, keep growing.
    """
    warnings = []
    if not autovacuum:
        warnings.append(
            "PostgreSQL runs with autovacuum = off: nothing refreshes the planner's "
            "statistics or removes dead rows, so plans cached while the tables were small "
            "stay for the life of each pooled connection and the job tables bloat. Turn it "
            "on (ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();) or run "
            "VACUUM (ANALYZE) on a schedule."
        )
    if not track_counts:
        warnings.append(
            "PostgreSQL runs with track_counts = off: autovacuum cannot see which tables "
            "changed, so it never vacuums or analyzes them. Turn it on "
            "(ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf();)."
        )
    return warnings


async def server_warnings(conn: asyncpg.Connection) -> list[str]:
    """:func:`maintenance_warnings` for the server ``conn`` is connected to."""
    row = await conn.fetchrow(q("server_maintenance_settings"))
    return maintenance_warnings(autovacuum=row["autovacuum"], track_counts=row["track_counts"])


async def ensure_database(admin_dsn: str, name: str) -> bool:
    """Create database ``name`` if missing (via ``admin_dsn``); return True if created."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        exists = await conn.fetchval(q("database_exists"), name)
        if exists:
            return False
        try:
            await conn.execute(f'CREATE DATABASE "{_ident(name)}"')
        except asyncpg.DuplicateDatabaseError:
            return False
        return True
    finally:
        await conn.close()


def dsn_for(dsn: str, name: str) -> str:
    """``dsn`` (any database on the server) with its database replaced by ``name``."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def create_database(
    admin_dsn: str, name: str, *, replace: bool = False, schema_dir: Path = SCHEMA_DIR
) -> str:
    """Create database ``name`` with every migration applied; return its DSN.

    ``replace`` drops a database of that name first (open connections too);
    without it an existing database is an error.
    """
    if replace:
        await drop_database(admin_dsn, name)
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{_ident(name)}"')
    finally:
        await admin.close()
    dsn = dsn_for(admin_dsn, name)
    conn = await connect(dsn)
    try:
        await migrate(conn, schema_dir)
    finally:
        await conn.close()
    return dsn


async def drop_database(admin_dsn: str, name: str) -> None:
    """Drop database ``name`` if it exists, ending its open connections."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{_ident(name)}" WITH (FORCE)')
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def scratch_database(admin_dsn: str, prefix: str) -> AsyncIterator[str]:
    """A new migrated database named ``<prefix>_<random>`` for one run; dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield await create_database(admin_dsn, name)
    finally:
        await drop_database(admin_dsn, name)


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"unsafe database name {name!r}")
    return name
