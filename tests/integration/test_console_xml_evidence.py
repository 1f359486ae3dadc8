"""The review console shows a result read from an e-invoice's XML (issue 44): each field's
XML path as its evidence, the XML's own reasons, and, for a Factur-X PDF, the page.

Uploaded through the real API, settled by a real driver from the XML (0 model calls),
rendered by the real console; the samples are vendored (tests/data/einvoices, NOTICE).
"""

from __future__ import annotations

import html
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.documents import pdf_attachments
from pipeline.invoice import SupplierRecord
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import asgi_client, settings_for, tenant_with_key
from tests.support.console import console_login, job_page
from tests.support.drivers import run_document_driver

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
GROSS_PATH = (
    "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/"
    "ram:ApplicableHeaderTradeSettlement/"
    "ram:SpecifiedTradeSettlementHeaderMonetarySummation/ram:GrandTotalAmount"
)


def _row(page: str, anchor: str) -> str:
    """The XML evidence table's row with id ``anchor`` (unescaped)."""
    start = page.index(f'<tr id="{anchor}">')
    return html.unescape(page[start : page.index("</tr>", start)])


async def test_the_review_page_shows_xml_paths_the_xml_reasons_and_the_page(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path)
    (xml,) = pdf_attachments((DATA / "XRECHNUNG_Einfach.pdf").read_bytes()).values()
    uploads = {
        "xrechnung.xml": xml,
        "mustang.pdf": (DATA / "MustangGnuaccountingBeispielRE-20190610_507.pdf").read_bytes(),
    }
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
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
    _, calls = await run_document_driver(
        pool, settings, len(jobs), today=datetime(2019, 6, 20, tzinfo=UTC)
    )
    assert calls == 0
    async with asgi_client(create_app(settings, pool=pool)) as client:
        await console_login(client, tk)
        pdf_page, _ = await job_page(client, jobs["mustang.pdf"])
        xml_page, _ = await job_page(client, jobs["xrechnung.xml"])

    # The PDF: its XML's values with their paths, its schema reason, and its page.
    assert "Read from the e-invoice's XML</h3>" in pdf_page
    assert "The page shown is the file's" in pdf_page
    gross = _row(pdf_page, "ev-gross_total")
    assert "571.04" in gross and f'<code class="xml-path">{GROSS_PATH}</code>' in gross
    number = _row(pdf_page, "ev-invoice_number")
    assert "RE-20190610/507" in number
    assert "/rsm:CrossIndustryInvoice/rsm:ExchangedDocument/ram:ID" in number
    item = _row(pdf_page, "ev-line_items-0")
    assert "/ram:IncludedSupplyChainTradeLineItem[1]" in item
    # The values table's evidence link leads to the path (no span marks the page).
    assert 'href="#ev-gross_total" class="evidence-link"' in pdf_page
    assert pdf_page.count('id="ev-gross_total"') == 1
    xml_reasons = pdf_page[pdf_page.index('class="reasons xml-reasons"') :]
    assert "<b>einvoice_invalid</b> <small>schema</small> not valid against" in xml_reasons
    assert "GermanBankleitzahlID" in xml_reasons.split("</ul>")[0]
    # The page: its image and the text read from it (which prints the invoice number).
    assert f'src="/console/jobs/{jobs["mustang.pdf"]}/pages/1.png"' in pdf_page
    text_view = pdf_page[pdf_page.index('<pre class="page" id="page-1">') :]
    assert "RE-20190610/507" in text_view.split("</pre>")[0]

    # The XML upload: no page; SUCCEEDED, no XML reason.
    assert "The upload is the XML alone: there is no page" in xml_page
    # No image of a page the XML does not have (its PNG was a 404 before).
    assert f"/console/jobs/{jobs['xrechnung.xml']}/pages/1.png" not in xml_page
    assert "529.87" in _row(xml_page, "ev-gross_total")
    assert GROSS_PATH in _row(xml_page, "ev-gross_total")
    assert "xml-reasons" not in xml_page
