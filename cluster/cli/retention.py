"""``fenceline retention``: a tenant's retention policy, its legal holds, and the pass.

A thin shell over :mod:`pipeline.jobs.retention` and :mod:`pipeline.jobs.legal_holds`:

* ``retention show --tenant T``: the tenant's policy (its own or the defaults), its
  holds, and what a pass would remove now, per table.
* ``retention run [--tenant T] [--dry-run]``: one pass now (every tenant unless one is
  named), printing what it removed per table; ``--dry-run`` prints what it would
  remove and writes nothing.
* ``retention policy --tenant T --content-days N --audit-days M``: the tenant's own
  horizons.
* ``retention hold|release --tenant T [--job ID] --reason R``: a legal hold on the
  tenant or one of its jobs (audited: who, when, why).

Output is JSON; a hold that is set already (or a release of none) exits 3.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import uuid
from typing import Any, TypeVar

import asyncpg

from cluster.cli.base import CommandTable, run_with_pool
from cluster.cli.tenant_ref import tenant_options, tenant_ref
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register

_T = TypeVar("_T")


def _days(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of days: {text!r}") from None
    if not 1 <= value <= 36500:
        raise argparse.ArgumentTypeError("must be 1 to 36500 days")
    return value


def _batch(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError("must be 1 to 100000")
    return value


async def _tenant_id(pool: asyncpg.Pool, args: argparse.Namespace) -> uuid.UUID:
    from pipeline.tenants import resolve_tenant

    async with pool.acquire() as conn:
        return (await resolve_tenant(conn, tenant_ref(args))).id


def _print(data: Any) -> None:
    print(json.dumps(data, default=str, indent=2, sort_keys=True))


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


# ---------------------------------------------------------------------- show
@command("retention show", "a tenant's retention policy, holds, and what is due", tenant_options)
def _show(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import asdict

    from pipeline.errors import NotFound
    from pipeline.jobs import RetentionConfig, held_jobs, retention_due, retention_policy

    config = RetentionConfig.from_settings(settings)

    async def work(pool: asyncpg.Pool) -> dict[str, Any]:
        tenant = await _tenant_id(pool, args)
        async with pool.acquire() as conn:
            policy = await retention_policy(conn, tenant, config)
            held = await held_jobs(conn, tenant)
        due = await retention_due(pool, config, tenant=tenant)
        return {"policy": asdict(policy), "held_jobs": held, "due": due.as_dict()}

    try:
        _print(run_with_pool(settings, work))
    except NotFound as exc:
        return _fail(exc)
    return 0


# ----------------------------------------------------------------------- run
def _run_args(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--tenant", metavar="NAME", help="only this tenant (default: all)")
    which.add_argument("--tenant-id", type=uuid.UUID, metavar="UUID")
    p.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")
    p.add_argument("--batch", type=_batch, default=None, help="jobs per batch (default: setting)")


@command("retention run", "run the retention pass now (or --dry-run)", _run_args)
def _run_pass(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import replace

    from pipeline.documents import open_document_store
    from pipeline.errors import NotFound
    from pipeline.jobs import RetentionConfig, retention_due, run_retention

    config = RetentionConfig.from_settings(settings)
    if args.batch is not None:
        config = replace(config, batch=args.batch)

    async def work(pool: asyncpg.Pool) -> dict[str, Any]:
        named = args.tenant is not None or args.tenant_id is not None
        tenant = await _tenant_id(pool, args) if named else None
        if args.dry_run:
            report = await retention_due(pool, config, tenant=tenant)
        else:
            store = open_document_store(settings)
            report = await run_retention(pool, config, tenant=tenant, store=store)
        return {"tenant_id": tenant, **report.as_dict()}

    try:
        _print(run_with_pool(settings, work))
    except NotFound as exc:
        return _fail(exc)
    return 0


# -------------------------------------------------------------------- policy
def _policy_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("--content-days", type=_days, required=True)
    p.add_argument("--audit-days", type=_days, required=True)


@command("retention policy", "set a tenant's retention horizons (days)", _policy_args)
def _policy(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import asdict

    from pipeline.errors import NotFound
    from pipeline.jobs import set_retention_policy

    async def work(pool: asyncpg.Pool) -> dict[str, Any]:
        tenant = await _tenant_id(pool, args)
        policy = await set_retention_policy(pool, tenant, args.content_days, args.audit_days)
        return asdict(policy)

    try:
        _print(run_with_pool(settings, work))
    except (NotFound, ValueError) as exc:
        return _fail(exc)
    return 0


# --------------------------------------------------------------- hold/release
def _hold_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("--job", type=uuid.UUID, help="one job of the tenant (default: the tenant)")
    p.add_argument("--reason", required=True, help="why (audit row)")
    p.add_argument("--by", default=None, help="who (audit row; default: cli:$USER)")


def _hold_or_release(args: argparse.Namespace, settings: Settings, hold: bool) -> int:
    from pipeline.errors import NotFound
    from pipeline.jobs import RetentionConfig, clear_legal_hold, set_legal_hold

    actor = args.by or f"cli:{getpass.getuser()}"

    async def work(pool: asyncpg.Pool) -> bool:
        tenant = await _tenant_id(pool, args)
        if hold:
            return await set_legal_hold(
                pool,
                tenant,
                reason=args.reason,
                actor=actor,
                job=args.job,
                defaults=RetentionConfig.from_settings(settings),
            )
        return await clear_legal_hold(pool, tenant, reason=args.reason, actor=actor, job=args.job)

    try:
        changed = run_with_pool(settings, work)
    except NotFound as exc:
        return _fail(exc)
    what = f"job {args.job}" if args.job else "tenant"
    _print({"legal_hold": "set" if hold else "cleared", "on": what, "changed": changed})
    return 0 if changed else 3


@command("retention hold", "put a tenant or one job under legal hold (audited)", _hold_args)
def _hold(args: argparse.Namespace, settings: Settings) -> int:
    return _hold_or_release(args, settings, hold=True)


@command("retention release", "clear a tenant's or a job's legal hold (audited)", _hold_args)
def _release(args: argparse.Namespace, settings: Settings) -> int:
    return _hold_or_release(args, settings, hold=False)
