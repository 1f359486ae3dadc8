"""Credit notes end to end (issue 47 item 2, issue 44): uploaded through the real API,
settled by a real driver from their XML, linked to the invoice they credit in the
transaction that commits them, and posted to the reference ERP receiver (a real loopback
HTTP server) once, as ``credit_note.created.v1`` naming that invoice's job.

The pair is Peppol BIS Billing 3.0's crediting example, vendored
(tests/data/einvoices/credit_notes, see its NOTICE): invoice 2018133 and the CreditNote
2018140 that credits all of it. Both state what contract v3 does not hold yet (item
allowances, price basis quantities, a prepaid amount), so each is approved by a
reviewer through the API, as a real tenant would. The unknown reference uses CEN's
credit note ``ubl-tc434-creditnote1`` (SUCCEEDED as it is) with a BillingReference added.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.delivery import delivery_settle_hook
from pipeline.delivery.signing import generate_secret
from pipeline.invoice import SupplierRecord
from pipeline.jobs import EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED, JobStore, Lease, Success
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import TenantKey, asgi_client, settings_for, tenant_with_key
from tests.support.delivery import Receiver, dispatcher_for, fetch, registry_for
from tests.support.drivers import run_document_driver
from tests.support.jobs import request

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
INVOICE = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_urspr_faktura.xml"
CREDIT = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
CREDIT_NOTE_1 = DATA / "ubl" / "ubl-tc434-creditnote1.xml"
EVENTS = [EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED]
PAIR_DAY = datetime(2018, 2, 11, tzinfo=UTC)  # the day after the credit note's issue
CREDIT_NOTE_1_DAY = datetime(2019, 9, 24, tzinfo=UTC)


async def _receiver(dsn: str, pool: asyncpg.Pool, tk: TenantKey) -> Receiver:
    """The reference ERP, registered for invoices and credit notes."""
    secret = generate_secret()
    receiver = Receiver(dsn, [secret])
    await registry_for(pool).register(
        tk.tenant.id, receiver.url(), secret=secret, event_types=EVENTS
    )
    return receiver


async def _pair_tenant(pool: asyncpg.Pool) -> TenantKey:
    """A tenant (jobs and review) with the Peppol pair's supplier on file and SEK permitted."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with pool.acquire() as conn:
        await upsert_supplier(
            conn,
            tk.tenant.id,
            SupplierRecord("Produtionsbolaget Sverige AB", "SE123456789001", frozenset()),
        )
        await permit_currencies(conn, tk.tenant.id, {"SEK"})
    return tk


async def _settled_count(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        n: int = await conn.fetchval(
            "SELECT count(*) FROM extraction_jobs WHERE state IN"
            " ('SUCCEEDED', 'REVIEW_REQUIRED', 'FAILED_TERMINAL', 'DEAD_LETTERED', 'CANCELLED')"
        )
    return n


async def _upload_and_settle(
    client: httpx.AsyncClient,
    pool: asyncpg.Pool,
    dsn: str,
    tmp: Path,
    tk: TenantKey,
    xml: bytes,
    day: datetime = PAIR_DAY,
) -> dict[str, Any]:
    """Upload ``xml``, run a driver until it settles; its job row and stored validation."""
    before = await _settled_count(pool)
    r = await client.post(
        "/v1/extraction-jobs",
        files={"document": ("doc.xml", xml)},
        data={"metadata": json.dumps({"schema_version": 3})},  # contract v3: credit notes
        headers=tk.headers,
    )
    assert r.status_code == 202, r.text
    job = uuid.UUID(r.json()["job_id"])
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    _, calls = await run_document_driver(
        pool, settings_for(dsn, state_dir=tmp), before + 1, store=store, today=day
    )
    assert calls == 0  # the XML stated it: no model call
    [row] = await fetch(
        pool,
        "SELECT j.id, j.state, j.state_version, r.result, r.validation FROM extraction_jobs j"
        " JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1",
        job,
    )
    return row


async def _approve(client: httpx.AsyncClient, tk: TenantKey, row: dict[str, Any]) -> None:
    r = await client.post(
        f"/v1/extraction-jobs/{row['id']}/review",
        json={"decision": "approve", "note": "checked", "state_version": row["state_version"]},
        headers=tk.headers,
    )
    assert (r.status_code, r.json()["state"]) == (200, "SUCCEEDED"), r.text


async def test_a_credit_note_reaches_the_erp_once_linked_to_its_invoice(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    tk = await _pair_tenant(pool)
    receiver = await _receiver(dsn, pool, tk)
    settings = settings_for(dsn, state_dir=tmp_path)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        invoice = await _upload_and_settle(client, pool, dsn, tmp_path, tk, INVOICE.read_bytes())
        assert invoice["state"] == "REVIEW_REQUIRED"
        assert "document_type" not in invoice["result"]  # an invoice dumps as before
        await _approve(client, tk, invoice)
        with receiver as erp:
            dispatcher = dispatcher_for(pool)
            try:
                assert (await dispatcher.run_once()).count("delivered") == 1
                credit = await _upload_and_settle(
                    client, pool, dsn, tmp_path, tk, CREDIT.read_bytes()
                )
                # SUCCEEDED from its XML (contract v3 holds its line allowances, charges
                # and price bases): the transaction that committed it found invoice
                # 2018133 delivered and linked it.
                assert credit["state"] == "SUCCEEDED", credit["validation"]["reasons"]
                assert credit["result"]["document_type"] == "credit_note"
                assert credit["result"]["preceding_invoice"]["number"] == "2018133"
                [link] = await fetch(
                    pool, "SELECT * FROM credit_note_links WHERE job_id = $1", credit["id"]
                )
                assert (link["tenant_id"], link["invoice_job_id"]) == (tk.tenant.id, invoice["id"])
                assert (await dispatcher.run_once()).count("delivered") == 1
                assert (await dispatcher.run_once()).count("delivered") == 0
            finally:
                await dispatcher.close()
            postings = await fetch(
                pool,
                "SELECT job_id, kind, credits_job_id, applications, effect_count, invoice"
                " FROM erp_postings WHERE ledger = $1 ORDER BY accepted_at",
                erp.ledger,
            )
    assert [
        (p["job_id"], p["kind"], p["credits_job_id"], p["applications"], p["effect_count"])
        for p in postings
    ] == [
        (invoice["id"], "invoice", None, 1, 1),
        (credit["id"], "credit_note", invoice["id"], 1, 1),
    ]
    assert postings[1]["invoice"]["gross_total"]["value"] == "10835"
    posted_line = postings[1]["invoice"]["line_items"][0]
    assert [(a["kind"], a["amount"]) for a in posted_line["allowances_charges"]] == [
        ("allowance", "300"),
        ("charge", "500"),
    ]
    assert posted_line["price_basis_quantity"] == "2"
    deliveries = await fetch(
        pool,
        "SELECT job_id, event_type, state, body FROM deliveries WHERE tenant_id = $1"
        " ORDER BY created_at",
        tk.tenant.id,
    )
    assert [(d["job_id"], d["event_type"], d["state"]) for d in deliveries] == [
        (invoice["id"], EVENT_COMPLETED, "delivered"),
        (credit["id"], EVENT_CREDIT_NOTE_CREATED, "delivered"),
    ]
    body = json.loads(bytes(deliveries[1]["body"]))
    assert body["type"] == EVENT_CREDIT_NOTE_CREATED
    assert body["data"]["credited_invoice"] == {
        "job_id": str(invoice["id"]),
        "invoice_number": "2018133",
    }


async def test_a_credit_note_waits_for_its_invoice_to_reach_the_erp(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """The invoice is approved but not yet delivered when its credit note settles: the
    credit note's delivery is held behind the invoice's (after_id), so the ERP, which
    books a credit only against an invoice it has, never answers 409 for it."""
    tk = await _pair_tenant(pool)
    receiver = await _receiver(dsn, pool, tk)
    settings = settings_for(dsn, state_dir=tmp_path)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        invoice = await _upload_and_settle(client, pool, dsn, tmp_path, tk, INVOICE.read_bytes())
        await _approve(client, tk, invoice)
        credit = await _upload_and_settle(client, pool, dsn, tmp_path, tk, CREDIT.read_bytes())
        assert credit["state"] == "SUCCEEDED", credit["validation"]["reasons"]
        held = await fetch(
            pool,
            "SELECT c.after_id = i.id AS behind FROM deliveries c, deliveries i"
            " WHERE c.job_id = $1 AND i.job_id = $2",
            credit["id"],
            invoice["id"],
        )
        assert [h["behind"] for h in held] == [True]
        with receiver as erp:
            dispatcher = dispatcher_for(pool)
            try:
                assert (await dispatcher.run_once()).count("delivered") == 1
                assert (await dispatcher.run_once()).count("delivered") == 1
                assert (await dispatcher.run_once()).count("delivered") == 0
            finally:
                await dispatcher.close()
            postings = await fetch(
                pool,
                "SELECT job_id, kind, credits_job_id FROM erp_postings WHERE ledger = $1"
                " ORDER BY accepted_at",
                erp.ledger,
            )
    assert [(p["job_id"], p["kind"], p["credits_job_id"]) for p in postings] == [
        (invoice["id"], "invoice", None),
        (credit["id"], "credit_note", invoice["id"]),
    ]
    states = await fetch(pool, "SELECT state FROM deliveries WHERE tenant_id = $1", tk.tenant.id)
    assert [d["state"] for d in states] == ["delivered", "delivered"]


async def test_a_credit_note_of_an_unknown_invoice_goes_to_review(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """CEN's credit note is SUCCEEDED as it is (it credits no invoice: delivered unlinked);
    naming an invoice the tenant never had, it is reviewed for that alone, and nothing
    reaches the ERP."""
    xml = CREDIT_NOTE_1.read_bytes()
    anchor = b"\t<cac:AccountingSupplierParty>"
    assert anchor in xml
    referenced = xml.replace(
        anchor,
        b"\t<cac:BillingReference><cac:InvoiceDocumentReference><cbc:ID>INV-404</cbc:ID>"
        b"</cac:InvoiceDocumentReference></cac:BillingReference>\n" + anchor,
        1,
    )
    results: dict[str, dict[str, Any]] = {}
    for name, document in (("plain", xml), ("referenced", referenced)):
        tk = await tenant_with_key(pool, scopes=("jobs",))
        async with pool.acquire() as conn:
            await upsert_supplier(
                conn,
                tk.tenant.id,
                SupplierRecord(
                    "My Supplier Company", "BE0000000196", frozenset({"BE91000000143476"})
                ),
            )
            await permit_currencies(conn, tk.tenant.id, {"EUR"})
        receiver = await _receiver(dsn, pool, tk)
        settings = settings_for(dsn, state_dir=tmp_path)
        async with asgi_client(create_app(settings, pool=pool)) as client:
            row = await _upload_and_settle(
                client, pool, dsn, tmp_path, tk, document, CREDIT_NOTE_1_DAY
            )
        with receiver as erp:
            dispatcher = dispatcher_for(pool)
            try:
                delivered = (await dispatcher.run_once()).count("delivered")
            finally:
                await dispatcher.close()
            postings = await fetch(
                pool,
                "SELECT job_id, kind, credits_job_id FROM erp_postings WHERE ledger = $1",
                erp.ledger,
            )
        results[name] = {"row": row, "delivered": delivered, "postings": postings}
    plain, referenced_ = results["plain"], results["referenced"]
    assert plain["row"]["state"] == "SUCCEEDED"
    assert plain["delivered"] == 1
    assert plain["postings"] == [
        {"job_id": plain["row"]["id"], "kind": "credit_note", "credits_job_id": None}
    ]
    assert referenced_["row"]["state"] == "REVIEW_REQUIRED"
    assert [
        (r["code"], r["field"], r["rule"]) for r in referenced_["row"]["validation"]["reasons"]
    ] == [("credit_note_reference_unknown", "preceding_invoice", "credit_notes.reference_unknown")]
    assert referenced_["delivered"] == 0 and referenced_["postings"] == []
    links = await fetch(
        pool, "SELECT * FROM credit_note_links WHERE job_id = $1", referenced_["row"]["id"]
    )
    assert links == []


def _result(number: str, gross: str, **extra: Any) -> dict[str, Any]:
    """A stored result of supplier ACME (by VAT id) as the job store reads it."""
    return {
        "supplier": {"name": {"value": "ACME AG"}, "vat_id": {"value": "DE111111111"}},
        "invoice_number": {"value": number},
        "gross_total": {"value": gross},
        "currency": {"value": "EUR"},
        **extra,
    }


def _credit(number: str, credits: str) -> dict[str, Any]:
    return _result(
        number, "10.00", document_type="credit_note", preceding_invoice={"number": credits}
    )


async def test_a_batch_settle_links_its_credit_notes_as_one_at_a_time_does(
    pool: asyncpg.Pool,
) -> None:
    """The group commit's path (``succeed_many``): a credit note of a delivered invoice
    is linked and delivered as a credit naming it; of an invoice the tenant has only
    awaiting review, or of two invoices of one number, it is reviewed, nothing delivered."""
    tk = await tenant_with_key(pool, scopes=("jobs",))
    await registry_for(pool).register(
        tk.tenant.id, "http://127.0.0.1:9/erp", secret=generate_secret(), event_types=EVENTS
    )
    # Two invoices of one number and other totals are both delivered only without the
    # near-duplicate check (with it, the second is reviewed possible_duplicate).
    store = JobStore(pool, Settings(possible_duplicate_check=False))
    store.settle_hooks.add(delivery_settle_hook)
    for _ in range(8):
        await store.accept(request(tk.tenant))
    leases = {lease.job_id: lease for lease in await store.claim("w", limit=8)}
    ordered = sorted(leases.values(), key=lambda lease: lease.job_id)
    invoice, pending, twin_a, twin_b, *credits = ordered
    await store.succeed(invoice, result=_result("INV-1", "119.00"))
    await store.succeed(
        pending, result=_result("INV-2", "119.00"), decision=JobState.REVIEW_REQUIRED
    )
    await store.succeed(twin_a, result=_result("INV-3", "119.00"))
    await store.succeed(twin_b, result=_result("INV-3", "238.00"))
    first: list[Lease] = credits
    outcome = await store.succeed_many(
        [
            Success(first[0], result=_credit("CN-1", " inv-1")),  # case and spaces: one identity
            Success(first[1], result=_credit("CN-2", "INV-2")),
            Success(first[2], result=_credit("CN-3", "INV-3")),
            Success(first[3], result=_credit("CN-4", "INV-9")),
        ]
    )
    states = {s.job_id: s.state.value for s in outcome.settled}
    assert [states[lease.job_id] for lease in first] == [
        "SUCCEEDED", "REVIEW_REQUIRED", "REVIEW_REQUIRED", "REVIEW_REQUIRED",
    ]  # fmt: skip
    reasons = await fetch(
        pool,
        "SELECT job_id, validation FROM extraction_results WHERE job_id = ANY($1::uuid[])",
        [lease.job_id for lease in first[1:]],
    )
    by_job = {r["job_id"]: [x["code"] for x in r["validation"]["reasons"]] for r in reasons}
    assert [by_job[lease.job_id] for lease in first[1:]] == [
        ["credit_note_reference_unknown"],
        ["credit_note_reference_ambiguous"],
        ["credit_note_reference_unknown"],
    ]
    links = await fetch(pool, "SELECT job_id, invoice_job_id FROM credit_note_links")
    assert [(r["job_id"], r["invoice_job_id"]) for r in links] == [
        (first[0].job_id, invoice.job_id)
    ]
    deliveries = await fetch(
        pool,
        "SELECT job_id, event_type, body FROM deliveries WHERE tenant_id = $1 ORDER BY created_at",
        tk.tenant.id,
    )
    assert [(d["job_id"], d["event_type"]) for d in deliveries] == [
        (invoice.job_id, EVENT_COMPLETED),
        (twin_a.job_id, EVENT_COMPLETED),
        (twin_b.job_id, EVENT_COMPLETED),
        (first[0].job_id, EVENT_CREDIT_NOTE_CREATED),
    ]
    body = json.loads(bytes(deliveries[-1]["body"]))
    assert body["data"]["credited_invoice"] == {
        "job_id": str(invoice.job_id),
        "invoice_number": " inv-1",
    }
