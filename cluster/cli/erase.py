"""``fenceline erase``: erase a job's content, or every job's of a tenant (audited).

A thin shell over :mod:`pipeline.jobs.erasure`, the operator's command.
``fenceline erase --job ID`` erases one job (its tenant is read from the job unless
``--tenant`` names it); ``fenceline erase --tenant T`` erases every job of tenant
``T``, in batches, oldest first. A job in flight is cancelled first. ``--by`` and
``--reason`` go to the tombstone. The document store is the deployment's
(``FENCELINE_DOCUMENT_STORE``, else the embedded folder under the state folder).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import uuid

from cluster.cli.base import CommandTable
from cluster.cli.tenant_ref import operated_tenant
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", type=uuid.UUID, help="erase this job's content")
    p.add_argument("--tenant", help="the tenant's name; without --job: erase all its jobs")
    p.add_argument("--batch", type=int, default=100, help="jobs selected per batch")
    p.add_argument("--by", default=None, help="who erases (tombstone; default: cli:$USER)")
    p.add_argument("--reason", default=None, help="why (tombstone)")


@command("erase", "erase a job's or a tenant's invoice content; keep the audit trail", _args)
def _erase(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import NotFound

    try:
        return asyncio.run(_erase_async(args, settings))
    except (NotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _erase_async(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.documents import open_document_store
    from pipeline.jobs import EraseRequest, erasable_jobs, erase_job, erase_tenant

    if args.job is None and args.tenant is None:
        raise ValueError("name a job (--job) or a tenant (--tenant)")
    request = EraseRequest(requested_by=args.by or f"cli:{getpass.getuser()}", reason=args.reason)
    store = open_document_store(settings)
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            tenant_id = await operated_tenant(conn, args.tenant, args.job)
        if args.job is not None:
            done = await erase_job(pool, tenant_id, args.job, request, store)
            print(json.dumps(done.__dict__, default=str, indent=2))
            return 0
        async with pool.acquire() as conn:
            total = await erasable_jobs(conn, tenant_id)
        print(f"erasing {total} jobs of tenant {tenant_id}", file=sys.stderr)

        def progress(done: int) -> None:
            print(f"  {done}/{total} jobs erased", file=sys.stderr, flush=True)

        report = await erase_tenant(
            pool, tenant_id, request, store, batch=args.batch, progress=progress
        )
        out = {
            "erased": [e.__dict__ for e in report.erased],
            "keys_shredded": report.keys_shredded,
        }
        print(json.dumps(out, default=str, indent=2))
        return 0
    finally:
        await pool.close()
