"""National accounts on file (``fenceline suppliers add --account SCHEME:ID``, migration
047): stored canonical and sealed as the IBANs are, listed, refused when malformed, held
against the account an e-invoice states, and carried sealed and opened in a delivery
body (docs/einvoices.md "The payee", docs/data-lifecycle.md "The supplier register")."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from pipeline.data_keys import DataKeys, shred_tenant_keys
from pipeline.delivery import delivery_settle_hook
from pipeline.envelope import ARMOR, LocalKeyProvider
from pipeline.errors import DataKeyShredded
from pipeline.extraction import read_invoice_xml
from pipeline.invoice import SupplierRecord
from pipeline.jobs import JobStore
from pipeline.sealed_results import open_body
from pipeline.settings import Settings
from pipeline.tenants import load_master_data, seal_register, upsert_supplier
from pipeline.validation import Decision
from pipeline.worker.interpretation import interpret_einvoice
from tests.integration.test_master_data_cli import fenceline
from tests.support.delivery import registry_for, reserve_receiver
from tests.support.einvoices import DATA
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

KEK = base64.b64encode(bytes(range(32))).decode()
#: A Peppol invoice paid to its IBAN, here to a Swedish bankgiro instead.
UBL = DATA / "ubl" / "ubl-tc434-example9.xml"


def _bankgiro() -> bytes:
    xml = UBL.read_bytes()
    out = xml.replace(b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>5050-1055</cbc:ID>")
    out = out.replace(b"<cbc:ID>RABONL2U</cbc:ID>", b"<cbc:ID>SE:BANKGIRO</cbc:ID>")
    assert out.count(b"SE:BANKGIRO") == 1
    return out


async def test_accounts_are_added_listed_and_held_against_the_invoice(
    pool: asyncpg.Pool, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    xml = _bankgiro()
    facts = read_invoice_xml(xml)
    assert facts.seller_name and facts.seller_vat_id and facts.issue_date
    tenant = await new_tenant(pool)
    add = ("suppliers", "add", "--tenant", tenant.name, facts.seller_name)
    code, out, err = await fenceline(
        capsys, dsn, *add, "--vat-id", facts.seller_vat_id,
        "--account", "se:plusgiro:333 89 29", "--account", "SE:BANKGIRO:5050-1055",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == {
        "name": facts.seller_name,
        "vat_id": facts.seller_vat_id,
        "tax_number": None,
        "ibans": [],
        "accounts": ["SE:BANKGIRO:50501055", "SE:PLUSGIRO:3338929"],  # canonical, sorted
        "created": True,
    }
    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "list", "--tenant", tenant.name, "--json"
    )
    assert code == 0, err
    assert [s["accounts"] for s in json.loads(out)] == [
        ["SE:BANKGIRO:50501055", "SE:PLUSGIRO:3338929"]
    ]
    code, out, _ = await fenceline(capsys, dsn, "suppliers", "list", "--tenant", tenant.name)
    assert out.rstrip("\n").endswith("SE:BANKGIRO:50501055  SE:PLUSGIRO:3338929")

    today = facts.issue_date + timedelta(days=1)

    async def decide() -> Any:
        async with pool.acquire() as conn:
            master = await load_master_data(
                conn, tenant.id, keys=DataKeys.from_settings(Settings())
            )
        master = type(master)(master.suppliers, frozenset({facts.currency or "EUR"}))
        return interpret_einvoice(xml, master, schema_version=3, today=today).report

    report = await decide()
    assert report.decision is Decision.SUCCEEDED, report.as_dict()
    # replaced with the plusgiro alone: the bankgiro the invoice states is not on file
    code, out, err = await fenceline(
        capsys, dsn, *add, "--vat-id", facts.seller_vat_id, "--account", "SE:PLUSGIRO:3338929"
    )
    assert code == 0 and json.loads(out)["created"] is False, err
    report = await decide()
    assert report.decision is Decision.REVIEW_REQUIRED
    assert [r.code.value for r in report.reasons] == ["payee_account_not_registered"]


@pytest.mark.parametrize(
    ("account", "message"),
    [
        ("50501055", "not SCHEME:ID"),
        ("BANKGIRO:5050-1055", "not a country code"),
        ("SE:BANKGIRO:5050/1055", "not 2-34 letters or digits"),
        ("SE:BANKGIRO:", "not 2-34 letters or digits"),
    ],
)
async def test_a_malformed_account_is_refused_and_nothing_stored(
    pool: asyncpg.Pool, dsn: str, capsys: pytest.CaptureFixture[str], account: str, message: str
) -> None:
    tenant = await new_tenant(pool)
    code, out, err = await fenceline(
        capsys, dsn, "suppliers", "add", "--tenant", tenant.name, "Leverantör AB",
        "--vat-id", "SE556677889901", "--account", account,
    )  # fmt: skip
    assert (code, out) == (2, "") and message in err
    async with pool.acquire() as conn:
        count = await conn.fetchval(
            "SELECT count(*) FROM suppliers WHERE tenant_id = $1", tenant.id
        )
    assert count == 0


async def test_accounts_are_sealed_at_rest_and_shredded_with_the_tenant(
    pool: asyncpg.Pool,
) -> None:
    """Written without a KEK the accounts are stored as they are; ``seal_register`` (what
    ``fenceline suppliers seal`` runs) seals them with their keyed hashes."""
    keys = DataKeys(LocalKeyProvider([base64.b64decode(KEK)]))
    tenant = await new_tenant(pool)
    record = SupplierRecord(
        "Leverantör AB", "SE556677889901", accounts=frozenset({"SE:BANKGIRO:50501055"})
    )
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tenant.id, record)  # no KEK: as it is
        row = await conn.fetchrow(
            "SELECT accounts, account_keys FROM suppliers WHERE tenant_id = $1", tenant.id
        )
        assert (row["accounts"], row["account_keys"]) == (["SE:BANKGIRO:50501055"], [])
    assert await seal_register(keys, pool) >= 1
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT accounts, account_keys FROM suppliers WHERE tenant_id = $1", tenant.id
        )
        [sealed], [key] = row["accounts"], row["account_keys"]
        assert sealed.startswith(ARMOR) and "50501055" not in sealed
        assert key != "SE:BANKGIRO:50501055" and "50501055" not in key
        master = await load_master_data(conn, tenant.id, keys=keys)
        assert [s.accounts for s in master.suppliers] == [frozenset({"SE:BANKGIRO:50501055"})]
        await shred_tenant_keys(conn, tenant.id)
        with pytest.raises(DataKeyShredded):
            await load_master_data(conn, tenant.id, keys=keys)


async def test_the_delivery_carries_the_account_sealed_and_opens_it(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """The body says ``payee_account: "national"``; the result's account is sealed whole
    in the stored body, as the IBAN is, and the dispatcher's opening gives it back."""
    keys = DataKeys(LocalKeyProvider([base64.b64decode(KEK)]))
    tenant = await new_tenant(pool)
    await reserve_receiver(dsn, registry_for(pool), tenant)
    store = JobStore(pool, Settings(kek=KEK, lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    job = await store.accept(request(tenant, text=f"INVOICE {uuid.uuid4().hex}"))
    [lease] = await store.claim("w")
    xml = {"page": 1, "start": 0, "end": 0, "quote": "/ubl:Invoice/cac:PaymentMeans"}
    account = {"scheme": "SE:BANKGIRO", "id": "50501055", "evidence": {**xml, "match": "xml"}}
    await store.succeed(lease, result={"iban": None, "payee_account": account})
    async with pool.acquire() as conn:
        body = bytes(
            await conn.fetchval("SELECT body FROM deliveries WHERE job_id = $1", job.job_id)
        )
        opened = await open_body(keys, conn, tenant.id, job.job_id, body)
    assert b"50501055" not in body
    data = json.loads(opened)["data"]
    assert data["payee_account"] == "national"
    assert data["result"]["payee_account"] == account
