"""E-invoices end to end (issue 44): uploaded through the real API, read by a real driver
from the document store, settled from their XML with no provider call and 0 tokens.

A CII XML upload and a Factur-X/ZUGFeRD PDF of a supplier on file end SUCCEEDED; an
invoice contract v2 cannot hold (document-level allowances) and an XML that is no
invoice go to review with their named reasons. Each job asks for contract v3
(``schema_version`` 3); what a v1 job gets is tests/integration/test_einvoice_delivery.py's.
"""

from __future__ import annotations

import json
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
#: Each job asks for contract v3, whose fields these uploads are read into.
V3 = {"metadata": json.dumps({"schema_version": 3})}
JOBS = "/v1/extraction-jobs"


async def test_e_invoices_settle_from_their_xml_without_a_model_call(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path)
    mustang = (DATA / "MustangGnuaccountingBeispielRE-20190610_507.pdf").read_bytes()
    xrechnung = (DATA / "XRECHNUNG_Einfach.pdf").read_bytes()
    rabatte = (DATA / "EN16931_Rabatte.pdf").read_bytes()
    (xml,) = pdf_attachments(xrechnung).values()
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with pool.acquire() as conn:
        for record in (
            SupplierRecord("Lieferant GmbH", "DE123456789", frozenset({"DE02120300000000202051"})),
            SupplierRecord("Bei Spiel GmbH", "DE136695976", frozenset({"DE88200800000970375700"})),
        ):
            await upsert_supplier(conn, tk.tenant.id, record)
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    uploads = {
        "xrechnung.xml": xml,
        "mustang.pdf": mustang,
        "rabatte.pdf": rabatte,
        "other.xml": b'<?xml version="1.0"?><Invoice xmlns="urn:x"/>',
    }
    jobs: dict[str, uuid.UUID] = {}
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for name, data in uploads.items():
            r = await client.post(
                JOBS, files={"document": (name, data)}, data=V3, headers=tk.headers
            )
            assert r.status_code == 202, r.text
            jobs[name] = uuid.UUID(r.json()["job_id"])
    # The samples were issued in 2018/2019: validate them on a day they were current.
    day = datetime(2019, 6, 20, tzinfo=UTC)
    rows, calls = await run_document_driver(pool, settings, len(jobs), today=day)
    assert calls == 0  # not one model call
    async with pool.acquire() as conn:
        results = {
            r["job_id"]: r
            for r in await conn.fetch(
                "SELECT job_id, result, validation FROM extraction_results"
                " WHERE job_id = ANY($1::uuid[])",
                list(jobs.values()),
            )
        }
        tokens = await conn.fetch(
            "SELECT engine, prompt_tokens, completion_tokens FROM job_attempts"
            " WHERE job_id = ANY($1::uuid[])",
            list(jobs.values()),
        )
    states = {name: rows[job]["state"] for name, job in jobs.items()}
    reasons = {
        name: sorted({r["code"] for r in results[job]["validation"].get("reasons", [])})
        for name, job in jobs.items()
    }
    assert states["xrechnung.xml"] == "SUCCEEDED", reasons["xrechnung.xml"]
    # Mustang's published XML carries ZUGFeRD 2.0's German bank code, which today's
    # Factur-X EN 16931 schema has no place for: reviewed with the validator's message.
    assert states["mustang.pdf"] == "REVIEW_REQUIRED"
    mustang_reasons = results[jobs["mustang.pdf"]]["validation"]["reasons"]
    assert [(r["code"], r["field"]) for r in mustang_reasons] == [("einvoice_invalid", "schema")]
    assert "GermanBankleitzahlID" in mustang_reasons[0]["detail"]
    # Rabatte's allowances and its prepayment are contract v3's (held: its amount due is
    # 215.07 - 50.00); it states no account to pay, so it needs no IBAN (paid to the one
    # on file: docs/extraction.md). It is FeRD's invoice 471102 of Lieferant GmbH again,
    # as the XRechnung sample, with another issue date: a possible amendment of it.
    assert states["rabatte.pdf"] == "REVIEW_REQUIRED"
    assert reasons["rabatte.pdf"] == ["possible_amendment"]
    rabatte_result = results[jobs["rabatte.pdf"]]["result"]
    assert (rabatte_result["prepaid_amount"]["value"], rabatte_result["amount_due"]["value"]) == (
        "50.00",
        "165.07",
    )
    assert states["other.xml"] == "REVIEW_REQUIRED"
    assert reasons["other.xml"][0] == "einvoice_invalid"
    result = results[jobs["xrechnung.xml"]]["result"]
    assert (result["invoice_number"]["value"], result["gross_total"]["value"]) == (
        "471102",
        "529.87",
    )
    assert result["gross_total"]["evidence"]["match"] == "xml"
    assert results[jobs["mustang.pdf"]]["result"]["gross_total"]["value"] == "571.04"
    assert len(tokens) == len(jobs)
    assert {(t["engine"], t["prompt_tokens"], t["completion_tokens"]) for t in tokens} == {
        ("cii-xml/1", 0, 0)
    }
    # The review console shows an XML-read job (XML evidence is a path, not a span).
    async with asgi_client(create_app(settings, pool=pool)) as client:
        await console_login(client, tk)
        for name in ("rabatte.pdf", "other.xml", "xrechnung.xml"):
            html, _ = await job_page(client, jobs[name])
            assert "471102" in html or name == "other.xml"


async def test_a_ubl_upload_is_recognised_and_settled_from_its_xml(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """A Peppol/XRechnung UBL upload is read as what it is, the same path as CII: the
    holdable one SUCCEEDED from its XML, a credit note read as a credit note."""
    settings = settings_for(dsn, state_dir=tmp_path)
    ubl = DATA / "ubl"
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with pool.acquire() as conn:
        await upsert_supplier(
            conn,
            tk.tenant.id,
            SupplierRecord("[Seller name]", "DE123456789", frozenset({"DE79000000001234567890"})),
        )
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    uploads = {
        "xrechnung-ubl.xml": (ubl / "01.07a-INVOICE_ubl.xml").read_bytes(),
        "credit-note.xml": (ubl / "ubl-tc434-creditnote1.xml").read_bytes(),
    }
    jobs: dict[str, uuid.UUID] = {}
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for name, data in uploads.items():
            r = await client.post(
                JOBS, files={"document": (name, data)}, data=V3, headers=tk.headers
            )
            assert r.status_code == 202, r.text
            jobs[name] = uuid.UUID(r.json()["job_id"])
    day = datetime(2016, 7, 1, tzinfo=UTC)  # the day after the XRechnung sample's issue
    rows, calls = await run_document_driver(pool, settings, len(jobs), today=day)
    assert calls == 0
    async with pool.acquire() as conn:
        results = {
            r["job_id"]: r
            for r in await conn.fetch(
                "SELECT job_id, result, validation FROM extraction_results"
                " WHERE job_id = ANY($1::uuid[])",
                list(jobs.values()),
            )
        }
        engines = await conn.fetch(
            "SELECT engine, prompt_tokens, completion_tokens FROM job_attempts"
            " WHERE job_id = ANY($1::uuid[])",
            list(jobs.values()),
        )
    # Read by the UBL reader, and recorded as such: 0 tokens, no model.
    assert [tuple(r) for r in engines] == [("ubl-xml/1", 0, 0)] * len(jobs)
    held = results[jobs["xrechnung-ubl.xml"]]
    assert rows[jobs["xrechnung-ubl.xml"]]["state"] == "SUCCEEDED", held["validation"]
    assert (held["result"]["invoice_number"]["value"], held["result"]["gross_total"]) == (
        "R1234567",
        {
            "value": "45.22",
            "evidence": {
                "page": 1,
                "start": 0,
                "end": 0,
                "quote": "/ubl:Invoice/cac:LegalMonetaryTotal/cbc:TaxInclusiveAmount",
                "match": "xml",
            },
        },
    )
    credit = results[jobs["credit-note.xml"]]
    assert rows[jobs["credit-note.xml"]]["state"] == "REVIEW_REQUIRED"
    # Read as a credit note (contract v3), reviewed for this tenant's own reasons (its
    # supplier is not on file, and it was issued after "today"), never as an invoice.
    assert credit["result"]["document_type"] == "credit_note"
    details = [r["detail"] for r in credit["validation"]["reasons"]]
    assert details == ["'My Supplier Company' not in master data", "2019-09-23 is after 2016-07-01"]
