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
from datetime import date
from typing import Any

import asyncpg
import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from cluster.cli import main
from pipeline.data_keys import DataKeys
from pipeline.invoice import ReasonCode
from pipeline.settings import Settings
from pipeline.tenants.master_data import load_master_data
from pipeline.validation import Decision, ValidationReport, validate
from pipeline.worker.interpretation import interpret_einvoice
from tests.support.einvoices import tax_number_only
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


def _keys() -> DataKeys:
    """The keys the CLI runs with here: it seals the IBANs on file when FENCELINE_KEK is set."""
    return DataKeys.from_settings(Settings())


async def decide(
    pool: asyncpg.Pool, tenant_id: uuid.UUID, inv: GeneratedInvoice
) -> ValidationReport:
    """Validate the invoice's true extraction against the tenant's stored master data."""
    async with pool.acquire() as conn:
        master = await load_master_data(conn, tenant_id, keys=_keys())
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
        "tax_number": None,
        "ibans": [iban],  # stored in the electronic form validation compares
        "accounts": [],
        "created": True,
    }
    after = await decide(pool, tenant_id, inv)
    assert after.decision is Decision.SUCCEEDED, after.reasons

    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "list", "--tenant-id", str(tenant_id), "--json"
    )
    assert code == 0, err
    assert json.loads(out) == [
        {
            "name": inv.supplier.name,
            "vat_id": inv.supplier.vat_id,
            "tax_number": None,
            "ibans": [iban],
            "accounts": [],
        }
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


async def test_a_supplier_known_by_its_tax_number_is_added_listed_and_matched(
    pool: asyncpg.Pool, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`suppliers add --tax-number` without a VAT id (migration 041): an e-invoice whose
    seller states only its tax number (BT-32) is SUCCEEDED against it, and reviewed
    against a tax number that is not its own."""
    tenant = await new_tenant(pool)
    iban = "DE02120300000000202051"
    add = ("suppliers", "add", "--tenant", tenant.name, "Lieferant GmbH")
    code, out, err = await fenceline(
        capsys, dsn, *add, "--tax-number", "201/113/40208", "--iban", iban
    )
    assert code == 0, err
    assert json.loads(out) == {
        "name": "Lieferant GmbH",
        "vat_id": None,
        "tax_number": "201/113/40208",
        "ibans": [iban],
        "accounts": [],
        "created": True,
    }
    xml = tax_number_only()
    async with pool.acquire() as conn:
        master = await load_master_data(conn, tenant.id, keys=_keys())
    wrong = interpret_einvoice(xml, master, schema_version=3, today=date(2018, 3, 6))
    assert {(r.code, r.field) for r in wrong.report.reasons} == {
        (ReasonCode.TAX_NUMBER_MISMATCH, "supplier.tax_number")
    }

    # The same tax number again replaces the record; a corrected one is another supplier.
    code, out, err = await fenceline(capsys, dsn, *add, "--tax-number", "201/113/40208")
    assert code == 0 and json.loads(out)["created"] is False, err
    code, out, err = await fenceline(
        capsys, dsn, *add, "--tax-number", "201/113/40209", "--iban", iban
    )
    assert code == 0 and json.loads(out)["created"] is True, err
    async with pool.acquire() as conn:
        master = await load_master_data(conn, tenant.id, keys=_keys())
    right = interpret_einvoice(xml, master, schema_version=3, today=date(2018, 3, 6))
    assert right.report.decision is Decision.SUCCEEDED, right.report.as_dict()

    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "list", "--tenant", tenant.name, "--json"
    )
    assert code == 0, err
    assert [(r["vat_id"], r["tax_number"], r["ibans"]) for r in json.loads(out)] == [
        (None, "201/113/40208", []),
        (None, "201/113/40209", [iban]),
    ]
    code, out, _ = await fenceline(capsys, dsn, "suppliers", "list", "--tenant", tenant.name)
    assert "Lieferant GmbH  tax number 201/113/40209  " + iban in out.splitlines()

    # A VAT-id supplier may not take a tax number another supplier holds; nor may a
    # supplier be added with neither (both refused, nothing stored).
    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "add", "--tenant", tenant.name, "Other GmbH",
        "--vat-id", "DE123456789", "--tax-number", "201/113/40209",
    )  # fmt: skip
    assert (code, out) == (2, "") and "another supplier's" in err
    code, out, err = await fenceline(capsys, dsn, "suppliers", "add", "--tenant", tenant.name, "X")
    assert (code, out) == (2, "") and "VAT id or a tax number" in err
    # Sweden's F-tax approval stands where a tax number goes, on every Swedish seller's
    # invoice: it names no registration, so it cannot stand for one supplier.
    code, out, err = await fenceline(
        capsys, dsn, *add, "--tax-number", "Godkänd för F-skatt", "--iban", iban
    )
    assert (code, out) == (2, "") and "names no registration" in err
    async with pool.acquire() as conn:
        count = await conn.fetchval(
            "SELECT count(*) FROM suppliers WHERE tenant_id = $1", tenant.id
        )
        assert count == 2
        # the schema holds the rule too: a row with neither is refused
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(
                "INSERT INTO suppliers (id, tenant_id, name) VALUES ($1, $2, 'Nobody')",
                uuid.uuid4(),
                tenant.id,
            )


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
