"""An e-invoice end to end (issue 44): uploaded through the real API, settled by a real
driver from its XML with no model call and 0 tokens, and posted to the reference ERP
receiver (a real loopback HTTP server) exactly once, however often the dispatcher runs.

The invoice is a vendored corpus Factur-X/ZUGFeRD PDF (tests/data/einvoices, see its
NOTICE) whose page agrees with its XML, of a supplier the tenant has on file.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.delivery import delivery_settle_hook
from pipeline.invoice import SupplierRecord
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import asgi_client, settings_for, tenant_with_key
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
    [result] = await fetch(pool, "SELECT result FROM extraction_results WHERE job_id = $1", job)
    assert result["result"]["gross_total"]["value"] == "529.87"
    assert result["result"]["gross_total"]["evidence"]["match"] == "xml"


async def test_a_ubl_invoice_with_a_charge_reaches_the_erp_with_its_charge(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """Contract v3 end to end: an XRechnung UBL upload with a document-level delivery
    charge (BG-21) is SUCCEEDED from its XML and the ERP's posting carries the charge."""
    settings = settings_for(dsn, state_dir=tmp_path)
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
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            files={"document": ("charge.xml", CHARGE.read_bytes())},
            headers=tk.headers,
        )
        assert r.status_code == 202, r.text
        job = uuid.UUID(r.json()["job_id"])
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
