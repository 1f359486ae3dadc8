"""Operator actions shared by the CLI and tests: database set-up and job explanation.

Kept free of argument parsing so each action is a plain awaitable with typed
inputs and a printable result.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from pipeline.database import connect, create_pool, ensure_database, migrate, server_warnings
from pipeline.jobs.explain import render_explain
from pipeline.jobs.store import JobStore
from pipeline.settings import Settings

__all__ = [
    "DatabaseSetup",
    "admin_dsn",
    "explain_job",
    "ping",
    "render_explain",
    "setup_database",
]


def admin_dsn(database_url: str) -> tuple[str, str]:
    """Split a DSN into (DSN of the server's ``postgres`` database, target database name)."""
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/") or "postgres"
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))
    return admin, name


@dataclass(frozen=True)
class DatabaseSetup:
    """What :func:`setup_database` did and what the operator should know."""

    #: Migration versions this call applied (empty: up to date).
    applied: list[int]
    #: The server's maintenance warnings (:func:`pipeline.database.server_warnings`).
    warnings: list[str]


async def setup_database(settings: Settings) -> DatabaseSetup:
    """Create the configured database if missing, apply pending migrations and read
    the server's maintenance settings."""
    admin, name = admin_dsn(settings.database_url)
    if name != "postgres":
        await ensure_database(admin, name)
    conn = await connect(settings.database_url)
    try:
        applied = await migrate(conn)
        return DatabaseSetup(applied=applied, warnings=await server_warnings(conn))
    finally:
        await conn.close()


async def explain_job(settings: Settings, job_id: uuid.UUID) -> dict[str, Any]:
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        return await JobStore(pool, settings).explain(job_id)
    finally:
        await pool.close()


async def ping(settings: Settings) -> bool:
    try:
        conn = await asyncpg.connect(settings.database_url, timeout=3)
    except (OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True
