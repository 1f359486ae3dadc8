"""``fenceline cancel``: cancel unsettled jobs, one by id or an operator's selection.

A thin shell over :mod:`pipeline.jobs.cancellation`. ``fenceline cancel JOB_ID``
cancels one job (its tenant is read from the job unless ``--tenant`` names it;
this is the operator's command). Without a job id, ``--tenant`` is required and
selects that tenant's jobs by ``--state`` (repeatable) and ``--older-than``;
``--dry-run`` lists the selection and changes nothing. ``--by`` and ``--reason``
go to the audit row.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta

from cluster.cli.base import CommandTable, duration
from cluster.cli.tenant_ref import operated_tenant
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register

_CANCELLABLE = ("READY", "RETRY_SCHEDULED", "RUNNING")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", nargs="?", type=uuid.UUID, help="one job; omit to select by filters")
    p.add_argument("--tenant", help="the tenant's name; required to select by filters")
    p.add_argument(
        "--state",
        action="append",
        choices=_CANCELLABLE,
        help="select jobs in this state (repeatable; default: all three)",
    )
    p.add_argument("--older-than", type=duration, help="select jobs accepted longer ago (1h, 2d)")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--dry-run", action="store_true", help="list the selection; cancel nothing")
    p.add_argument("--by", default=None, help="who cancels (audit row; default: cli:$USER)")
    p.add_argument("--reason", default=None, help="why (audit row)")


@command("cancel", "cancel READY, RETRY_SCHEDULED or RUNNING jobs (audited)", _args)
def _cancel(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import CancelRefused, NotFound

    try:
        return asyncio.run(_cancel_async(args, settings))
    except CancelRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except (NotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _cancel_async(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.clock import DatabaseClock
    from pipeline.database import create_pool
    from pipeline.jobs import CancelFilter, CancelRequest, cancel_job, cancel_matching
    from pipeline.states import JobState

    if args.job is None and args.tenant is None:
        raise ValueError("name a job, or select with --tenant (and --state, --older-than)")
    request = CancelRequest(requested_by=args.by or f"cli:{getpass.getuser()}", reason=args.reason)
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            tenant_id = await operated_tenant(conn, args.tenant, args.job)
        if args.job is not None:
            done = await cancel_job(pool, tenant_id, args.job, request)
            print(json.dumps(done.__dict__, default=str, indent=2))
            return 0
        selection = CancelFilter(
            tenant_id=tenant_id,
            states=frozenset(JobState(s) for s in (args.state or _CANCELLABLE)),
            created_before=(
                datetime.now(UTC) - timedelta(seconds=args.older_than) if args.older_than else None
            ),
            limit=args.limit,
        )
        report = await cancel_matching(
            pool, selection, request, dry_run=args.dry_run, clock=DatabaseClock()
        )
        out = {
            "dry_run": args.dry_run,
            "selected": [str(j) for j in report.selected],
            "cancelled": [c.__dict__ for c in report.cancelled],
            "refused": {str(k): v for k, v in report.refused.items()},
        }
        print(json.dumps(out, default=str, indent=2))
        return 0
    finally:
        await pool.close()
