"""Operator actions shared by the CLI and tests: database set-up and job explanation.

Kept free of argument parsing so each action is a plain awaitable with typed
inputs and a printable result.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from pipeline.database import connect, create_pool, ensure_database, migrate
from pipeline.jobs.store import JobStore
from pipeline.settings import Settings


def admin_dsn(database_url: str) -> tuple[str, str]:
    """Split a DSN into (DSN of the server's ``postgres`` database, target database name)."""
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/") or "postgres"
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))
    return admin, name


async def setup_database(settings: Settings) -> list[int]:
    """Create the configured database if missing and apply pending migrations."""
    admin, name = admin_dsn(settings.database_url)
    if name != "postgres":
        await ensure_database(admin, name)
    conn = await connect(settings.database_url)
    try:
        return await migrate(conn)
    finally:
        await conn.close()


async def explain_job(settings: Settings, job_id: uuid.UUID) -> dict[str, Any]:
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        return await JobStore(pool, settings).explain(job_id)
    finally:
        await pool.close()


def render_explain(data: dict[str, Any]) -> str:
    """A human-readable audit trail: acceptance, publication, ingestion, attempts, outcome."""
    job = data["job"]
    lines = [
        f"job {job['id']}  tenant {job['tenant_id']}",
        f"  state {job['state']} (v{job['state_version']})  attempt {job['attempt']}/"
        f"{job['max_attempts']}  fence {job['fence']}",
        f"  created {job['created_at']}  deadline {job['deadline_at']}  finished "
        f"{job['finished_at']}",
    ]
    if job.get("terminal_reason"):
        lines.append(f"  terminal reason: {job['terminal_reason']}")
    if job.get("last_error_class"):
        lines.append(f"  last error: {job['last_error_class']}: {job['last_error']}")
    lines.append("state changes:")
    for e in data["events"]:
        lines.append(
            f"  #{e['seq']} {e['created_at']}  {e['from_state'] or '-':>15} -> {e['to_state']:<15}"
            f" v{e['state_version']} fence {e['fence']} attempt {e['attempt']}"
            + (f"  ({e['detail']})" if e["detail"] else "")
        )
    lines.append("attempts:")
    for a in data["attempts"]:
        usage = f"tokens in/out {a['prompt_tokens']}/{a['completion_tokens']}"
        late = f"  late result discarded at {a['late_result_at']}" if a["late_result_at"] else ""
        lines.append(
            f"  attempt {a['attempt']} fence {a['fence']} worker {a['worker_id']}: {a['outcome']}"
            f" {a['error_class'] or ''} {usage} uncertain={a['uncertain']}"
            f" [{a['started_at']} .. {a['ended_at']}]{late}"
        )
    lines.append("outbox:")
    for o in data["outbox"]:
        lines.append(
            f"  {o['event_type']:<32} created {o['created_at']} published {o['published_at']}"
        )
    if data["inbox"]:
        lines.append("inbox:")
        for i in data["inbox"]:
            lines.append(f"  event {i['event_id']} received {i['received_at']}")
    if data.get("redrives"):
        lines.append("re-drives:")
        for r in data["redrives"]:
            lines.append(
                f"  {r['created_at']} by {r['requested_by']}: {r['reason']}  (attempts before"
                f" {r['attempts_before']}/{r['max_attempts_before']}, now up to"
                f" {r['max_attempts_after']}; failed with {r['terminal_reason']}"
                f" {r['error_class'] or ''};"
                f" v{r['from_state_version']} -> v{r['to_state_version']})"
            )
    for extra in ("deliveries", "reviews"):
        for d in data.get(extra, []):
            lines.append(f"{extra[:-1]}: {d}")
    return "\n".join(lines)


async def ping(settings: Settings) -> bool:
    try:
        conn = await asyncpg.connect(settings.database_url, timeout=3)
    except (OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True
