"""An e-invoice end to end (issue 44): uploaded through the real API, settled by a real
driver from its XML with no model call and 0 tokens, and posted to the reference ERP
receiver (a real loopback HTTP server) exactly once, however often the dispatcher runs.

The invoice is a vendored corpus Factur-X/ZUGFeRD PDF (tests/data/einvoices, see its
NOTICE) whose page agrees with its XML, of a supplier the tenant has on file.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.delivery import delivery_settle_hook
from pipeline.invoice import SupplierRecord
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import TenantKey, add_key, asgi_client, settings_for, tenant_with_key
from tests.support.delivery import dispatcher_for, fetch, postings, registry_for, reserve_receiver
from tests.support.drivers import run_document_driver

pytestmark = pytest.mark.integration

# A Factur-X PDF whose XML validates against its profile's schema (the Mustang sample's
# does not since the schema check: tests/unit/test_einvoice_schema.py).
XRECHNUNG = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "XRECHNUNG_Einfach.pdf"
# A UBL invoice with a document-level delivery charge (contract v3).
CHARGE = (
    Path(__file__).resolve().parents[1] / "data" / "einvoices" / "ubl" / "01.21a-INVOICE_ubl.xml"
)


async def test_a_factur_x_pdf_is_posted_to_the_erp_once_without_a_model_call(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path)
    tk = await tenant_with_key(pool, scopes=("jobs",))
    async with pool.acquire() as conn:
        await upsert_supplier(
            conn,
            tk.tenant.id,
            SupplierRecord("Lieferant GmbH", "DE123456789", frozenset({"DE02120300000000202051"})),
        )
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            files={"document": ("xrechnung.pdf", XRECHNUNG.read_bytes())},
            headers=tk.headers,
        )
        assert r.status_code == 202, r.text
        job = uuid.UUID(r.json()["job_id"])
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    day = datetime(2018, 3, 15, tzinfo=UTC)  # the sample was issued 2018-03-05
    with receiver as erp:
        rows, calls = await run_document_driver(pool, settings, 1, store=store, today=day)
        [row] = rows.values()
        assert calls == 0  # the XML stated the invoice: not one model call
        assert (row["id"], row["state"]) == (job, "SUCCEEDED")
        dispatcher = dispatcher_for(pool)
        try:
            report = await dispatcher.run_once()
            assert report.count("delivered") == 1
            again = await dispatcher.run_once()  # nothing left to deliver, nothing posted
            assert again.count("delivered") == 0
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == {job: 1}
    [attempt] = await fetch(
        pool,
        "SELECT engine, prompt_tokens, completion_tokens FROM job_attempts WHERE job_id = $1",
        job,
    )
    assert attempt == {"engine": "cii-xml/1", "prompt_tokens": 0, "completion_tokens": 0}
    [delivery] = await fetch(pool, "SELECT state FROM deliveries WHERE job_id = $1", job)
    assert delivery == {"state": "delivered"}
    [result] = await fetch(
        pool, "SELECT result, validation FROM extraction_results WHERE job_id = $1", job
    )
    assert result["result"]["gross_total"]["value"] == "529.87"
    assert result["result"]["gross_total"]["evidence"]["match"] == "xml"
    # A v1 job (the default): the XML's tax number beside the VAT id is left out, and
    # the result is no contract v3 result.
    assert result["result"]["supplier"]["vat_id"]["value"] == "DE123456789"
    assert "tax_number" not in result["result"]["supplier"]
    assert result["validation"]["schema_version"] == "fenceline.extraction/2"


async def test_a_ubl_invoice_with_a_charge_reaches_the_erp_with_its_charge(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """Contract v3 end to end: an XRechnung UBL upload with a document-level delivery
    charge (BG-21), by a job asking for contract v3 (``schema_version`` 3), is SUCCEEDED
    from its XML and the ERP's posting carries the charge."""
    settings = settings_for(dsn, state_dir=tmp_path)
    tk = await _charge_supplier_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload_charge(client, tk, schema_version=3)
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    day = datetime(2020, 11, 28, tzinfo=UTC)  # the day after the sample's issue
    with receiver as erp:
        rows, calls = await run_document_driver(pool, settings, 1, store=store, today=day)
        [row] = rows.values()
        assert calls == 0
        assert (row["id"], row["state"]) == (job, "SUCCEEDED")
        dispatcher = dispatcher_for(pool)
        try:
            assert (await dispatcher.run_once()).count("delivered") == 1
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == {job: 1}
    [attempt] = await fetch(pool, "SELECT engine FROM job_attempts WHERE job_id = $1", job)
    assert attempt == {"engine": "ubl-xml/1"}
    [stored] = await fetch(pool, "SELECT validation FROM extraction_results WHERE job_id = $1", job)
    assert stored["validation"]["schema_version"] == "fenceline.extraction/3"
    [posted] = await fetch(pool, "SELECT invoice FROM erp_postings WHERE job_id = $1", job)
    invoice = posted["invoice"]
    assert (invoice["net_total"]["value"], invoice["gross_total"]["value"]) == ("233.00", "233.00")
    assert [
        (e["kind"], e["amount"], e["tax_rate"], e["tax_category"], e["reason"])
        for e in invoice["allowances_charges"]
    ] == [("charge", "25.00", "0.00", "AE", "Lieferpauschale")]


async def test_a_v1_job_on_the_charged_invoice_is_reviewed_and_not_delivered(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """The same invoice by a job asking for schema_version 1: its charge changes the net
    total a v1 client would read, so the job goes to review with
    ``contract_v3_required`` naming it, and nothing is posted to the ERP."""
    settings = settings_for(dsn, state_dir=tmp_path)
    tk = await _charge_supplier_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload_charge(client, tk, schema_version=1)
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    day = datetime(2020, 11, 28, tzinfo=UTC)
    with receiver as erp:
        rows, calls = await run_document_driver(pool, settings, 1, store=store, today=day)
        [row] = rows.values()
        assert calls == 0
        assert (row["id"], row["state"]) == (job, "REVIEW_REQUIRED")
        dispatcher = dispatcher_for(pool)
        try:
            assert (await dispatcher.run_once()).count("delivered") == 0
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == {}
    [stored] = await fetch(pool, "SELECT validation FROM extraction_results WHERE job_id = $1", job)
    assert [(r["code"], r["field"], r["rule"]) for r in stored["validation"]["reasons"]] == [
        ("contract_v3_required", "allowances_charges", "validation.contract_v3_required")
    ]
    assert "schema_version 3" in stored["validation"]["reasons"][0]["detail"]

    # A reviewer cannot approve it into a v1 delivery, through the API or the SQL guard.
    reviewer = await add_key(pool, tk, ("jobs", "review"))
    async with asgi_client(create_app(settings, pool=pool)) as client:
        seen = (await client.get(f"/v1/extraction-jobs/{job}", headers=tk.headers)).json()
        url = f"/v1/extraction-jobs/{job}/review"
        body = {"decision": "approve", "note": "ok", "state_version": seen["state_version"]}
        approve = await client.post(url, json=body, headers=reviewer.headers)
        async with pool.acquire() as conn:
            direct = await conn.fetchrow(
                q("job_decide_review_if_pending"),
                job,
                tk.tenant.id,
                seen["state_version"],
                "SUCCEEDED",
            )
        reject = await client.post(
            url, json={**body, "decision": "reject"}, headers=reviewer.headers
        )
    assert approve.status_code == 409, approve.text
    assert approve.json()["reason"] == "result_not_approvable"
    assert "schema_version 3" in approve.json()["detail"]
    assert direct is None
    assert reject.status_code == 200 and reject.json()["state"] == "FAILED_TERMINAL"


async def _charge_supplier_tenant(pool: asyncpg.Pool) -> TenantKey:
    """A tenant with the charged invoice's supplier and EUR on file."""
    tk = await tenant_with_key(pool, scopes=("jobs",))
    async with pool.acquire() as conn:
        await upsert_supplier(
            conn,
            tk.tenant.id,
            SupplierRecord(
                "Mustermann GmbH", "DE 123456789", frozenset({"DE79000000001234567890"})
            ),
        )
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    return tk


async def _upload_charge(
    client: httpx.AsyncClient, tk: TenantKey, *, schema_version: int
) -> uuid.UUID:
    """Upload the charged invoice as a job asking for ``schema_version``."""
    r = await client.post(
        "/v1/extraction-jobs",
        files={"document": ("charge.xml", CHARGE.read_bytes())},
        data={"metadata": json.dumps({"schema_version": schema_version})},
        headers=tk.headers,
    )
    assert r.status_code == 202, r.text
    job = await client.get(r.headers["Location"], headers=tk.headers)
    assert job.json()["schema_version"] == schema_version
    return uuid.UUID(r.json()["job_id"])
