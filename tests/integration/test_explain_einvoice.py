"""``fenceline explain`` of a job settled from an e-invoice's XML (issue 44): it says the
result was read from the XML (the reader's engine, 0 tokens, no model call), gives each
field's XML path as its evidence, and lists the XML's own reasons (here the schema
validator's message) beside validation's.

The uploads go through the real API and a real driver; the samples are vendored
(tests/data/einvoices, see its NOTICE).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.documents import pdf_attachments
from pipeline.invoice import SupplierRecord
from pipeline.jobs import JobStore, render_explain
from pipeline.settings import Settings
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import asgi_client, settings_for, tenant_with_key
from tests.support.drivers import run_document_driver

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
GROSS_PATH = (
    "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/"
    "ram:ApplicableHeaderTradeSettlement/"
    "ram:SpecifiedTradeSettlementHeaderMonetarySummation/ram:GrandTotalAmount"
)


async def test_explain_shows_an_xml_read_result_its_paths_and_its_schema_reason(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path)
    (xml,) = pdf_attachments((DATA / "XRECHNUNG_Einfach.pdf").read_bytes()).values()
    uploads = {
        "xrechnung.xml": xml,
        "mustang.pdf": (DATA / "MustangGnuaccountingBeispielRE-20190610_507.pdf").read_bytes(),
    }
    tk = await tenant_with_key(pool, scopes=("jobs",))
    async with pool.acquire() as conn:
        for record in (
            SupplierRecord("Lieferant GmbH", "DE123456789", frozenset({"DE02120300000000202051"})),
            SupplierRecord("Bei Spiel GmbH", "DE136695976", frozenset({"DE88200800000970375700"})),
        ):
            await upsert_supplier(conn, tk.tenant.id, record)
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    jobs: dict[str, uuid.UUID] = {}
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for name, data in uploads.items():
            r = await client.post(
                "/v1/extraction-jobs", files={"document": (name, data)}, headers=tk.headers
            )
            assert r.status_code == 202, r.text
            jobs[name] = uuid.UUID(r.json()["job_id"])
    day = datetime(2019, 6, 20, tzinfo=UTC)
    _, calls = await run_document_driver(pool, settings, len(jobs), today=day)
    assert calls == 0
    store = JobStore(pool, Settings())

    accepted = await store.explain(jobs["xrechnung.xml"])
    section = accepted["result"]
    assert (section["decision"], section["read_from"], section["engine"]) == (
        "SUCCEEDED",
        "xml",
        "cii-xml/1",
    )
    assert (section["prompt_tokens"], section["completion_tokens"]) == (0, 0)
    assert section["model_calls_admitted"] == 0
    by_field = {f["field"]: f for f in section["fields"]}
    assert by_field["gross_total"]["value"] == "529.87"
    assert by_field["gross_total"]["evidence"]["quote"] == GROSS_PATH
    assert {f["evidence"]["match"] for f in section["fields"]} == {"xml"}
    assert "line_items[1]" in by_field and "tax_lines[0]" in by_field
    assert section["reasons"] == []
    text = render_explain(accepted)
    assert (
        "result: SUCCEEDED, read from the e-invoice's XML by cii-xml/1: tokens in/out 0/0,"
        " no model call" in text
    )
    assert f"  gross_total = '529.87'  <- xml {GROSS_PATH}" in text

    reviewed = await store.explain(jobs["mustang.pdf"])
    section = reviewed["result"]
    assert (section["decision"], section["read_from"]) == ("REVIEW_REQUIRED", "xml")
    assert [(r["code"], r["field"]) for r in section["reasons"]] == [("einvoice_invalid", "schema")]
    text = render_explain(reviewed)
    assert "result: REVIEW_REQUIRED, read from the e-invoice's XML by cii-xml/1" in text
    assert "  reason einvoice_invalid@schema: not valid against facturx-en16931/" in text
    assert "GermanBankleitzahlID" in text
    assert "  gross_total = '571.04'  <- xml /rsm:CrossIndustryInvoice/" in text
