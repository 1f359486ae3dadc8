"""Database and job read-outs: ``db migrate``, ``explain``, ``status``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid

from cluster.cli.base import CommandTable
from pipeline.settings import Settings
from pipeline.text_safety import visible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


@command("db migrate", "create the database if missing and apply migrations")
def _db_migrate(_args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.jobs import setup_database

    setup = asyncio.run(setup_database(settings))
    print(f"migrations applied: {setup.applied or 'none (up to date)'}")
    for warning in setup.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _job_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=uuid.UUID)
    p.add_argument("--json", action="store_true")


@command("explain", "the full audit trail of one job", _job_arg)
def _explain(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import NotFound
    from pipeline.jobs import explain_job, render_explain

    try:
        data = asyncio.run(explain_job(settings, args.job_id))
    except NotFound:
        print(f"no job {args.job_id}", file=sys.stderr)
        return 1
    print(json.dumps(data, default=str, indent=2) if args.json else render_explain(data))
    return 0


@command("status", "job counts per state, backlog and oldest runnable age")
def _status(_args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.jobs import JobStore
    from pipeline.queries import q

    async def go() -> None:
        pool = await create_pool(settings.database_url, max_size=1)
        try:
            async with pool.acquire() as conn:
                rows = await conn.fetch(q("report_state_counts"))
            backlog = await JobStore(pool, settings).backlog()
        finally:
            await pool.close()
        for r in sorted(rows, key=lambda r: r["state"]):
            print(visible(f"{r['state']:<16} {r['n']}"))
        age = backlog["oldest_runnable_age_seconds"]
        print(
            f"runnable {backlog['runnable']}  running {backlog['running']}  oldest runnable "
            f"age {float(age):.1f} s"
            if age is not None
            else ""
        )

    asyncio.run(go())
    return 0
