"""Tenant and API-key administration: ``fenceline tenants …`` and ``fenceline keys …``.

Every command is a thin shell over :mod:`pipeline.tenants.admin`, so the CLI and
the tested administration functions cannot drift: scopes are checked there (a
typo never mints a key with a scope nothing checks), tenants are addressed by
``--tenant NAME`` or ``--tenant-id UUID`` (:mod:`cluster.cli.tenant_ref`), and usage
is read exactly as admission reads it.

Secrets are printed once, by ``tenants create`` and ``keys create``; nothing
else prints a secret or a key hash (``keys list`` shows the stored prefix).
Errors go to stderr: 2 for a bad argument (an unknown scope), 1 for a tenant or
key that does not exist.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import asyncpg

from cluster.cli.base import CommandTable, duration, run_with_connection
from cluster.cli.tenant_ref import tenant_options, tenant_ref
from pipeline.errors import NotFound
from pipeline.jobs import VERSION_POLICIES, set_version_policy
from pipeline.settings import Settings
from pipeline.spend import ModelSpend
from pipeline.tenants import (
    SCOPES,
    Tenant,
    add_tenant,
    issue_key,
    list_keys,
    list_tenants,
    resolve_tenant,
    revoke_key,
    set_quotas,
    tenant_usage,
)
from pipeline.text_safety import visible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register

T = TypeVar("T")

_SCOPE_HELP = (
    f"one of {', '.join(sorted(SCOPES))}; repeat for several (default: jobs). "
    "jobs: submit and read this tenant's jobs; review: also decide reviews; "
    "operator: also see retry details and decide reviews"
)


class _Refused(Exception):
    """A clear, expected failure: print it and exit with ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _run(settings: Settings, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """Run ``work`` on one connection; map expected failures to :class:`_Refused`."""
    try:
        return run_with_connection(settings, work)
    except ValueError as exc:  # tenant_admin.check_scopes
        raise _Refused(str(exc), 2) from None
    except NotFound as exc:
        raise _Refused(f"no {exc}", 1) from None
    except asyncpg.UniqueViolationError:
        raise _Refused("a tenant with that name already exists", 1) from None


def _handled(fn: Callable[[argparse.Namespace, Settings], int]) -> Callable[..., int]:
    def wrapper(args: argparse.Namespace, settings: Settings) -> int:
        try:
            return fn(args, settings)
        except _Refused as exc:
            print(f"fenceline: error: {exc}", file=sys.stderr)
            return exc.code

    wrapper.__doc__ = fn.__doc__
    return wrapper


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _money(text: str) -> Decimal:
    """A non-negative decimal amount (never a float: money stays exact)."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a decimal amount: {text!r}") from None
    if not value.is_finite() or value < 0:
        raise argparse.ArgumentTypeError("must be a finite amount, 0 or more")
    return value


def _limits(t: Tenant) -> dict[str, Any]:
    return {
        "tenant_id": str(t.id),
        "name": t.name,
        "weight": t.weight,
        "max_in_flight": t.max_in_flight,
        "max_pending_jobs": t.max_pending_jobs,
        "max_pending_bytes": t.max_pending_bytes,
        "max_pending_tokens": t.max_pending_tokens,
        "spend_budget": str(t.spend_budget),
    }


# ------------------------------------------------------------------- tenants
def _create_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("--weight", type=_positive, default=1, help="fair-share weight")
    p.add_argument("--max-in-flight", type=_positive, default=1000)
    p.add_argument(
        "--scope", action="append", default=None, help=f"first key's scope: {_SCOPE_HELP}"
    )


@command("tenants create", "create a tenant and print its first API key (once)", _create_args)
@_handled
def _tenants_create(args: argparse.Namespace, settings: Settings) -> int:
    scopes = tuple(args.scope or ["jobs"])
    tenant, key = _run(
        settings,
        lambda c: add_tenant(
            c, args.name, scopes=scopes, weight=args.weight, max_in_flight=args.max_in_flight
        ),
    )
    out = {
        "tenant_id": str(tenant.id),
        "name": tenant.name,
        "key_id": str(key.key_id),
        "api_key": key.secret,
        "scopes": list(key.scopes),
    }
    print(json.dumps(out, indent=2))
    return 0


def _none(_: argparse.ArgumentParser) -> None:
    return None


@command("tenants list", "list tenants with their limits", _none)
@_handled
def _tenants_list(_args: argparse.Namespace, settings: Settings) -> int:
    for t in _run(settings, list_tenants):
        print(
            f"{t.id}  {visible(t.name)}  weight={t.weight}  max_in_flight={t.max_in_flight}  "
            f"max_pending_jobs={t.max_pending_jobs}  spend_budget={t.spend_budget}"
        )
    return 0


def _quota_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("--max-pending-jobs", type=_count)
    p.add_argument("--max-pending-bytes", type=_count)
    p.add_argument("--max-pending-tokens", type=_count)
    p.add_argument("--spend-budget", type=_money, help="per spend period, e.g. 250.00")
    p.add_argument("--max-in-flight", type=_positive)
    p.add_argument("--weight", type=_positive)


@command(
    "tenants quotas",
    "change a tenant's admission limits (omitted ones stay) and print them all",
    _quota_args,
)
@_handled
def _tenants_quotas(args: argparse.Namespace, settings: Settings) -> int:
    tenant = _run(
        settings,
        lambda c: set_quotas(
            c,
            tenant_ref(args),
            max_pending_jobs=args.max_pending_jobs,
            max_pending_bytes=args.max_pending_bytes,
            max_pending_tokens=args.max_pending_tokens,
            spend_budget=args.spend_budget,
            max_in_flight=args.max_in_flight,
            weight=args.weight,
        ),
    )
    print(json.dumps(_limits(tenant), indent=2))
    return 0


def _version_policy_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("policy", choices=VERSION_POLICIES)


@command(
    "tenants version-policy",
    "how a later version of an invoice is decided: held for review (review, the default)"
    " or superseding the earlier one at once (auto_supersede)",
    _version_policy_args,
)
@_handled
def _tenants_version_policy(args: argparse.Namespace, settings: Settings) -> int:
    async def work(conn: asyncpg.Connection) -> Tenant:
        tenant = await resolve_tenant(conn, tenant_ref(args))
        await set_version_policy(conn, tenant.id, args.policy)
        return tenant

    t = _run(settings, work)
    out = {"tenant_id": str(t.id), "name": t.name, "invoice_version_policy": args.policy}
    print(json.dumps(out, indent=2))
    return 0


@command("tenants usage", "a tenant's pending work and spend against its quotas", tenant_options)
@_handled
def _tenants_usage(args: argparse.Namespace, settings: Settings) -> int:
    u = _run(settings, lambda c: tenant_usage(c, tenant_ref(args), settings))
    t = u.tenant
    out = {
        "tenant_id": str(t.id),
        "name": t.name,
        "pending_jobs": {"used": u.pending_jobs, "limit": t.max_pending_jobs},
        "pending_bytes": {"used": u.pending_bytes, "limit": t.max_pending_bytes},
        "pending_tokens": {"used": u.pending_tokens, "limit": t.max_pending_tokens},
        "spend": {
            "used": str(u.spent),
            "limit": str(t.spend_budget),
            # used = reserved (held for unsettled jobs) + reconciled (reported usage)
            "reserved": str(u.spend.reserved),
            "reconciled": str(u.spend.reconciled),
            "reserved_total": str(u.spend.reserved_total),
            "released_total": str(u.spend.released_total),
            "open_reservations": u.spend.open_reservations,
            "charged_attempts": u.spend.charges,
            "charged_tokens": u.spend.charged_tokens,
            # attempts of unknown usage charged at their reservation until they report
            "estimated_attempts": u.spend.estimated_charges,
            "estimated_amount": str(u.spend.estimated_amount),
            "replaced_estimates": u.spend.replaced_estimates,
            "by_model": [_model_spend(m) for m in u.by_model],
            "prices": _prices(settings),
            "period": settings.spend_period,
            "seconds_to_next_period": round(u.seconds_to_next_period),
        },
    }
    print(json.dumps(out, indent=2))
    return 0


def _model_spend(m: ModelSpend) -> dict[str, object]:
    """One model's charges of the period, with the prices they were charged at."""
    return {
        "model": m.model,
        "prompt_price_per_1k": None if m.prices is None else _plain(m.prices.prompt_per_1k),
        "completion_price_per_1k": (
            None if m.prices is None else _plain(m.prices.completion_per_1k)
        ),
        "charged_attempts": m.charges,
        "prompt_tokens": m.prompt_tokens,
        "completion_tokens": m.completion_tokens,
        "amount": str(m.amount),
        "estimated_attempts": m.estimated_charges,
        "estimated_amount": str(m.estimated_amount),
    }


def _plain(price: Decimal) -> str:
    """A price as written in configuration: no trailing zeros, no exponent."""
    return format(price.normalize(), "f")


def _prices(settings: Settings) -> dict[str, object]:
    """The configured prices per 1,000 tokens: the default pair and each model's."""
    prices = settings.prices()
    return {
        "default": prices.default.model_dump(mode="json"),
        "models": {name: p.model_dump(mode="json") for name, p in sorted(prices.models.items())},
    }


# ---------------------------------------------------------------------- keys
def _key_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("--scope", action="append", default=None, help=_SCOPE_HELP)
    p.add_argument(
        "--expires-in",
        type=duration,
        default=None,
        metavar="DURATION",
        help="refuse the key (401 key_expired) after this long: 90d, 12h, 30m or seconds "
        "(default: never)",
    )
    p.add_argument(
        "--label",
        default=None,
        help='a name people know the key by ("Ana Ruiz"), shown in the console as who '
        "reviewed or re-drove a job (default: the key's prefix); printable, at most 100 "
        "characters",
    )


@command("keys create", "create an API key for a tenant (the secret is printed once)", _key_args)
@_handled
def _keys_create(args: argparse.Namespace, settings: Settings) -> int:
    scopes = tuple(args.scope or ["jobs"])
    key = _run(
        settings,
        lambda c: issue_key(
            c,
            tenant_ref(args),
            scopes=scopes,
            expires_in_seconds=args.expires_in,
            label=args.label,
        ),
    )
    out = {
        "tenant_id": str(key.tenant_id),
        "key_id": str(key.key_id),
        "api_key": key.secret,
        "scopes": list(key.scopes),
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "label": key.label,
    }
    print(json.dumps(out))
    return 0


@command(
    "keys list",
    "a tenant's keys: id, prefix, label, scopes, created, expires, revoked",
    tenant_options,
)
@_handled
def _keys_list(args: argparse.Namespace, settings: Settings) -> int:
    for k in _run(settings, lambda c: list_keys(c, tenant_ref(args))):
        revoked = k.revoked_at.isoformat() if k.revoked_at else "-"
        expires = k.expires_at.isoformat() if k.expires_at else "never"
        label = json.dumps(visible(k.label), ensure_ascii=False) if k.label else "-"
        print(
            f"{k.key_id}  {k.prefix}…  label={label}  scopes={','.join(k.scopes)}  "
            f"created={k.created_at.isoformat()}  expires={expires}  revoked={revoked}"
        )
    return 0


def _revoke_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("key_id", type=uuid.UUID)


@command("keys revoke", "revoke an API key (open status streams end too)", _revoke_args)
@_handled
def _keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    if not _run(settings, lambda c: revoke_key(c, tenant_ref(args), args.key_id)):
        raise _Refused("no active key with that id for that tenant", 1)
    print("revoked")
    return 0
