"""Sub-commands that maintain a tenant's validation master data.

``fenceline suppliers add|list`` and ``fenceline tenants currencies``: without
suppliers on file every job of a tenant is REVIEW_REQUIRED with
``supplier_unknown``, and without the right currencies with
``currency_not_permitted``. Tenants are named by name or id. Running drivers see
a change within ``FENCELINE_MASTER_DATA_TTL_SECONDS``.

Exit status: 0 done, 1 no such tenant, 2 refused input (nothing stored).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TypeVar

import asyncpg

from cluster.cli.base import CommandTable, run_with_connection, run_with_pool
from cluster.cli.tenant_ref import tenant_options, tenant_ref
from pipeline.settings import Settings
from pipeline.text_safety import visible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register

T = TypeVar("T")


def _refused(exc: Exception) -> int:
    from pipeline.errors import NotFound

    print(str(exc) if not isinstance(exc, NotFound) else f"no {exc}", file=sys.stderr)
    return 1 if isinstance(exc, NotFound) else 2


def _supplier_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("name", help="the supplier's name as invoices print it")
    p.add_argument("--vat-id", help="VAT id (compared without punctuation)")
    p.add_argument(
        "--tax-number",
        help="tax number (EN 16931 BT-32), for a supplier whose invoices state no VAT id; "
        "--vat-id, --tax-number or both",
    )
    p.add_argument(
        "--iban",
        action="append",
        default=[],
        help="an IBAN on file for this supplier (repeatable; none: any valid IBAN passes)",
    )
    p.add_argument(
        "--account",
        action="append",
        default=[],
        metavar="SCHEME:ID",
        help="a national account on file that is no IBAN, e.g. SE:BANKGIRO:5050-1055 or "
        "SE:PLUSGIRO:3338929 (repeatable; the scheme upper case, the id compared without "
        "spaces and hyphens); an invoice stating one not on file is reviewed",
    )


@command(
    "suppliers add",
    "add a supplier (or replace the one with that VAT id, else that tax number)",
    _supplier_args,
)
def _suppliers_add(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import DataKeys
    from pipeline.errors import NotFound
    from pipeline.tenants import add_supplier

    keys = DataKeys.from_settings(settings)  # the IBANs are sealed at rest with a KEK
    try:
        record, created = run_with_connection(
            settings,
            lambda conn: add_supplier(
                conn,
                tenant_ref(args),
                name=args.name,
                vat_id=args.vat_id,
                ibans=args.iban,
                tax_number=args.tax_number,
                accounts=args.account,
                keys=keys,
            ),
        )
    except (NotFound, ValueError) as exc:
        return _refused(exc)
    out = {
        "name": record.name,
        "vat_id": record.vat_id,
        "tax_number": record.tax_number,
        "ibans": sorted(record.ibans),
        "accounts": sorted(record.accounts),
        "created": created,
    }
    print(json.dumps(out, indent=2))
    return 0


def _tenant_arg(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("--json", action="store_true")


@command(
    "suppliers list",
    "a tenant's suppliers with their VAT ids, tax numbers, IBANs and national accounts",
    _tenant_arg,
)
def _suppliers_list(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import DataKeys
    from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable, NotFound
    from pipeline.tenants import list_suppliers

    keys = DataKeys.from_settings(settings)
    try:
        records = run_with_connection(
            settings, lambda conn: list_suppliers(conn, tenant_ref(args), keys=keys)
        )
    except (NotFound, DataKeyShredded, DataKeyNotHere, DataKeyUnavailable) as exc:
        return _refused(exc)
    if args.json:
        rows = [
            {
                "name": r.name,
                "vat_id": r.vat_id,
                "tax_number": r.tax_number,
                "ibans": sorted(r.ibans),
                "accounts": sorted(r.accounts),
            }
            for r in records
        ]
        print(json.dumps(rows, indent=2))
    else:
        for r in records:
            ibans = " ".join(sorted(r.ibans)) or "(no IBAN on file)"
            accounts = "".join(f"  {a}" for a in sorted(r.accounts))
            ids = "  ".join(
                f"{label}{value}"
                for label, value in (("", r.vat_id), ("tax number ", r.tax_number))
                if value
            )
            print(visible(f"{r.name}  {ids}  {ibans}{accounts}"))
    return 0


def _seal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=200, help="suppliers read per batch")


@command(
    "suppliers seal",
    "seal the IBANs on file stored unsealed (before migration 044 or without a KEK)",
    _seal_args,
)
def _suppliers_seal(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.data_keys import DataKeys
    from pipeline.tenants import seal_register

    keys = DataKeys.from_settings(settings)
    if not keys.sealing:
        print("no key-encryption key: set FENCELINE_KEK or FENCELINE_KEK_FILE", file=sys.stderr)
        return 2
    sealed = run_with_pool(settings, lambda pool: seal_register(keys, pool, batch=args.batch))
    print(json.dumps({"sealed": sealed}))
    return 0


def _currency_args(p: argparse.ArgumentParser) -> None:
    tenant_options(p)
    p.add_argument("codes", nargs="*", help="ISO 4217 codes to permit (none: show them)")


@command(
    "tenants currencies",
    "show or replace the currencies a tenant's invoices may use (ISO 4217)",
    _currency_args,
)
def _tenants_currencies(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import NotFound
    from pipeline.tenants import resolve_tenant, set_currencies

    async def show(conn: asyncpg.Connection) -> tuple[str, ...]:
        return (await resolve_tenant(conn, tenant_ref(args))).allowed_currencies

    try:
        codes = run_with_connection(
            settings,
            (lambda conn: set_currencies(conn, tenant_ref(args), args.codes))
            if args.codes
            else show,
        )
    except (NotFound, ValueError) as exc:
        return _refused(exc)
    print(" ".join(codes))
    return 0
