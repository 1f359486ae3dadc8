"""``fenceline data-keys``: the tenants' data keys that seal invoice content at rest.

A thin shell over :mod:`pipeline.data_keys` (docs/data-lifecycle.md, "Encryption at
rest"):

* ``data-keys rotate``: re-wrap every data key under the current KEK. Put the new KEK
  first and keep the old one after it (``FENCELINE_KEK=new,old``, or the key file's
  first two lines), run this, then drop the old one. No sealed value is rewritten.
* ``data-keys show --tenant T``: the tenant's data keys (version, KEK id, made,
  re-wrapped, shredded), never a key.
* ``data-keys shred --tenant T --confirm-tenant T``: crypto-shredding; every value
  sealed under the tenant's keys is unreadable from now on, backups included.

Output is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TypeVar

import asyncpg

from cluster.cli.base import CommandTable, run_with_pool
from cluster.cli.tenant_ref import tenant_options, tenant_ref
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register

_T = TypeVar("_T")


def _print(data: Any) -> None:
    print(json.dumps(data, default=str, indent=2, sort_keys=True))


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def _rotate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=500, help="keys read per batch")


@command("data-keys rotate", "re-wrap every tenant data key under the current KEK", _rotate_args)
def _rotate(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import rotate_kek
    from pipeline.envelope import LocalKeyProvider
    from pipeline.errors import DataKeyUnavailable

    try:
        provider = LocalKeyProvider.from_settings(settings)
        if provider is None:
            raise ValueError("no key-encryption key: set FENCELINE_KEK or FENCELINE_KEK_FILE")
        rewrapped = run_with_pool(
            settings, lambda pool: rotate_kek(pool, provider, batch=args.batch)
        )
    except (ValueError, DataKeyUnavailable) as exc:
        return _fail(exc)
    _print({"kek_id": provider.current_kek_id, "rewrapped": rewrapped})
    return 0


@command("data-keys show", "a tenant's data keys (never the keys themselves)", tenant_options)
def _show(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import tenant_keys
    from pipeline.errors import NotFound
    from pipeline.tenants import resolve_tenant

    async def work(pool: asyncpg.Pool) -> dict[str, Any]:
        async with pool.acquire() as conn:
            tenant = (await resolve_tenant(conn, tenant_ref(args))).id
            return {"tenant_id": tenant, "keys": await tenant_keys(conn, tenant)}

    try:
        _print(run_with_pool(settings, work))
    except NotFound as exc:
        return _fail(exc)
    return 0


def _shred_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument(
        "--confirm-tenant", required=True, help="the tenant's name or id again: nothing undoes this"
    )


@command("data-keys shred", "destroy a tenant's data keys: its sealed content is gone", _shred_args)
def _shred(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import shred_tenant_keys
    from pipeline.errors import NotFound
    from pipeline.tenants import resolve_tenant

    async def work(pool: asyncpg.Pool) -> dict[str, Any]:
        async with pool.acquire() as conn:
            tenant = await resolve_tenant(conn, tenant_ref(args))
            if args.confirm_tenant not in (tenant.name, str(tenant.id)):
                raise ValueError("--confirm-tenant must name the same tenant again")
            return {"tenant_id": tenant.id, "shredded": await shred_tenant_keys(conn, tenant.id)}

    try:
        _print(run_with_pool(settings, work))
    except (NotFound, ValueError) as exc:
        return _fail(exc)
    return 0
