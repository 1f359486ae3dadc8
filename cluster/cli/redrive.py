"""``fenceline redrive``: run FAILED_TERMINAL jobs again under their own ids (audited).

A thin shell over :mod:`pipeline.jobs.redrive`: one job (``--job``) or a
selection of the tenant's failed jobs (``--error-class``, ``--failed-from``,
``--failed-before``). The tenant is named on the command line and scopes every
query; ``--by`` and ``--reason`` go to the audit row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from datetime import datetime

from cluster.cli.base import CommandTable
from pipeline.clock import parse_instant
from pipeline.settings import Settings
from pipeline.text_safety import refuse_invisible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def _instant(text: str) -> datetime:
    """An argparse type: the date-time as the REST route reads it (with its offset, and
    inside years 1-9999 once moved to UTC), so argparse answers a bad one with a one-line
    error and exit 2, not the database's traceback."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (e.g. 2025-01-31T00:00:00Z): {text!r}") from None


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` (the REST route's bounds)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}-{high}: {text!r}")
        return value

    return parse


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tenant", required=True, help="the tenant's name; scopes every query")
    p.add_argument("--job", type=uuid.UUID, help="one job; omit to select by the filters")
    p.add_argument("--error-class", help="select failed jobs whose last error class is this")
    p.add_argument("--failed-from", type=_instant, help="RFC 3339 time with offset, inclusive")
    p.add_argument("--failed-before", type=_instant, help="RFC 3339 time with offset, exclusive")
    p.add_argument("--limit", type=_bounded(1, 1000), default=100, help="1-1000")
    p.add_argument(
        "--attempts", type=_bounded(0, 20), help="fresh attempts, 0-20 (default: settings)"
    )
    p.add_argument("--by", required=True, help="who re-drives (kept in the audit row)")
    p.add_argument("--reason", required=True, help="why (kept in the audit row)")


@command("redrive", "re-drive FAILED_TERMINAL jobs with a fresh attempt budget (audited)", _args)
def _redrive(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import NotFound, RedriveRefused

    try:
        return asyncio.run(_redrive_async(args, settings))
    except (NotFound, RedriveRefused, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _redrive_async(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.jobs import RedriveFilter, RedriveRequest, redrive_job, redrive_matching
    from pipeline.tenants import get_tenant_by_name

    refuse_invisible("--by", args.by)
    refuse_invisible("--reason", args.reason, multiline=True)
    request = RedriveRequest(
        requested_by=args.by,
        reason=args.reason,
        attempts=args.attempts or settings.redrive_attempts,
        deadline_seconds=settings.default_deadline_seconds,
    )
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            tenant = await get_tenant_by_name(conn, args.tenant)
        if tenant is None:
            print(f"no tenant named {args.tenant!r}", file=sys.stderr)
            return 2
        if args.job is not None:
            done = await redrive_job(pool, tenant.id, args.job, request, settings=settings)
            print(json.dumps(done.__dict__, default=str, indent=2))
            return 0
        report = await redrive_matching(
            pool,
            RedriveFilter(
                tenant_id=tenant.id,
                error_class=args.error_class,
                failed_from=args.failed_from,
                failed_before=args.failed_before,
                limit=args.limit,
            ),
            request,
            settings=settings,
        )
        out = {
            "redriven": [r.__dict__ for r in report.redriven],
            "refused": {str(k): v for k, v in report.refused.items()},
        }
        print(json.dumps(out, default=str, indent=2))
        return 0
    finally:
        await pool.close()
