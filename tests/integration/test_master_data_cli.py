"""`fenceline suppliers add|list` and `fenceline tenants currencies` against real PostgreSQL.

A tenant made with `fenceline tenants create` has no suppliers on file, so every
invoice it submits is REVIEW_REQUIRED with ``supplier_unknown``. These commands
are how an operator fixes that; the tests check the effect where it matters, in
validation over the master data the drivers load.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from cluster.cli import main
from pipeline.invoice import ReasonCode
from pipeline.tenants.master_data import load_master_data
from pipeline.validation import Decision, ValidationReport, validate
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration


async def fenceline(
    capsys: pytest.CaptureFixture[str], dsn: str, *args: str
) -> tuple[int, str, str]:
    """Run the CLI in this process (its own event loop, in a thread): (status, out, err)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["--database-url", dsn, *args])
    out, err = capsys.readouterr()
    return code, out, err


async def decide(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, inv: GeneratedInvoice
) -> ValidationReport:
    """Validate the invoice's true extraction against the tenant's stored master data."""
    async with pool.acquire() as conn:
        master = await load_master_data(conn, tenant_id)
    return validate(inv.truth, inv.ocr_text, master, today=inv.today)


def print_form(iban: str) -> str:
    """An IBAN as people type it: groups of four, lower case."""
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)).lower()


async def test_suppliers_add_makes_a_cli_tenants_invoices_pass(
    pool: asyncpg.Pool, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = generate_invoice(5, max_line_items=3)
    (iban,) = inv.supplier.ibans
    name = f"acme-{uuid.uuid4().hex[:6]}"
    code, out, err = await fenceline(capsys, dsn, "tenants", "create", name)
    assert code == 0, err
    tenant_id = uuid.UUID(json.loads(out)["tenant_id"])
    before = await decide(pool, tenant_id, inv)
    assert before.decision is Decision.REVIEW_REQUIRED
    assert before.codes == {ReasonCode.SUPPLIER_UNKNOWN}

    code, out, err = await fenceline(
        capsys,
        dsn,
        "suppliers",
        "add",
        "--tenant",
        name,
        inv.supplier.name,
        "--vat-id",
        inv.supplier.vat_id,
        "--iban",
        print_form(iban),
    )
    assert code == 0, err
    added: dict[str, Any] = json.loads(out)
    assert added == {
        "name": inv.supplier.name,
        "vat_id": inv.supplier.vat_id,
        "ibans": [iban],  # stored in the electronic form validation compares
        "created": True,
    }
    after = await decide(pool, tenant_id, inv)
    assert after.decision is Decision.SUCCEEDED, after.reasons

    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "list", "--tenant-id", str(tenant_id), "--json"
    )
    assert code == 0, err
    assert json.loads(out) == [
        {"name": inv.supplier.name, "vat_id": inv.supplier.vat_id, "ibans": [iban]}
    ]
    code, out, _ = await fenceline(capsys, dsn, "suppliers", "list", "--tenant", name)
    assert code == 0 and out == f"{inv.supplier.name}  {inv.supplier.vat_id}  {iban}\n"

    # The same VAT id again replaces the record: here with another (valid) IBAN on file,
    # which the invoice does not print, so its IBAN is no longer registered.
    other = "GB82WEST12345698765432"
    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "add", "--tenant", name, inv.supplier.name, "--vat-id",
        inv.supplier.vat_id, "--iban", other,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["created"] is False
    replaced = await decide(pool, tenant_id, inv)
    assert ReasonCode.IBAN_NOT_REGISTERED in replaced.codes

    # Tenant scope: another tenant sees none of it.
    stranger = await new_tenant(pool)
    code, out, _ = await fenceline(
        capsys, dsn, "suppliers", "list", "--tenant-id", str(stranger.id), "--json"
    )
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(
    ("name", "vat_id", "iban", "message"),
    [
        ("Acme GmbH", "DE123456789", "DE89370400440532013001", "mod-97"),
        ("Acme GmbH", "DE123456789", "DE8937040044053201300", "22 characters"),
        ("Acme GmbH", "DE123456789", "not an iban", "not an IBAN"),
        ("Acme\u202eHbmG", "DE123456789", "DE89370400440532013000", "invisible"),
        ("Acme GmbH", " - . ", "DE89370400440532013000", "no letters or digits"),
    ],
)
async def test_suppliers_add_refuses_what_validation_could_never_match(
    pool: asyncpg.Pool,
    dsn: str,
    capsys: pytest.CaptureFixture[str],
    name: str,
    vat_id: str,
    iban: str,
    message: str,
) -> None:
    tenant = await new_tenant(pool)
    args = ("suppliers", "add", "--tenant", tenant.name, name, "--vat-id", vat_id, "--iban", iban)
    code, out, err = await fenceline(capsys, dsn, *args)
    assert code == 2 and out == ""
    assert message in err
    async with pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT count(*) FROM suppliers WHERE tenant_id = $1", tenant.id)
            == 0
        )
    # The valid IBAN of the same table is accepted, so the refusals are about the input.
    code, _, err = await fenceline(
        capsys, dsn, "suppliers", "add", "--tenant", tenant.name, "Acme GmbH",
        "--vat-id", "DE123456789", "--iban", "DE89370400440532013000",
    )  # fmt: skip
    assert code == 0, err


async def test_unknown_tenant_is_status_1(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(uuid.uuid4())
    for args in (
        ("suppliers", "add", "--tenant-id", missing, "Acme", "--vat-id", "DE1"),
        ("suppliers", "list", "--tenant-id", missing),
        ("tenants", "currencies", "--tenant-id", missing, "EUR"),
        ("tenants", "currencies", "--tenant", "no-such-tenant"),
    ):
        code, out, err = await fenceline(capsys, dsn, *args)
        assert (code, out) == (1, ""), args
        assert "no tenant" in err, args


async def test_tenants_currencies_shows_sets_and_validates(
    pool: asyncpg.Pool, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = generate_invoice(7, max_line_items=3)
    tenant = await new_tenant(pool)
    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "add", "--tenant", tenant.name, inv.supplier.name, "--vat-id",
        inv.supplier.vat_id, *[a for i in inv.supplier.ibans for a in ("--iban", i)],
    )  # fmt: skip
    assert code == 0, err
    assert (await decide(pool, tenant.id, inv)).decision is Decision.SUCCEEDED

    code, out, _ = await fenceline(capsys, dsn, "tenants", "currencies", "--tenant", tenant.name)
    assert code == 0 and out.split() == ["EUR", "USD", "GBP", "CHF"]  # the schema default

    others = [c for c in ("JPY", "SEK") if c != inv.currency]
    code, out, err = await fenceline(
        capsys,
        dsn,
        "tenants",
        "currencies",
        "--tenant-id",
        str(tenant.id),
        *(c.lower() for c in others),
        others[0],
    )
    assert code == 0, err
    assert out.split() == others  # upper-cased, duplicates dropped, order kept
    refused = await decide(pool, tenant.id, inv)
    assert refused.codes == {ReasonCode.CURRENCY_NOT_PERMITTED}

    for bad in (["XYZ"], ["EUR", "EURO"], ["XAU"]):
        code, out, err = await fenceline(
            capsys, dsn, "tenants", "currencies", "--tenant", tenant.name, *bad
        )
        assert code == 2 and out == "" and "ISO 4217" in err, bad
    async with pool.acquire() as conn:
        stored = await conn.fetchval(
            "SELECT allowed_currencies FROM tenants WHERE id = $1", tenant.id
        )
    assert stored == others  # nothing changed by the refusals

    code, out, err = await fenceline(
        capsys, dsn, "tenants", "currencies", "--tenant", tenant.name, inv.currency, "USD"
    )
    assert code == 0 and out.split() == [inv.currency, "USD"], err
    assert (await decide(pool, tenant.id, inv)).decision is Decision.SUCCEEDED
