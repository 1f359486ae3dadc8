"""Encryption at rest (issue 46, item 3) against the real PostgreSQL and the real
worker path: per-tenant data keys wrapped by a KEK, KEK rotation, crypto-shredding.

The target: after jobs run to SUCCEEDED and are delivered, ``pg_dump`` of the
database holds none of the invoice text in plaintext: not the text as kept (a pasted
text, the text a file was read as), not a line of it anywhere else (the results'
strings and their validation reports' details, sealed inside the result and the
delivery body, opened where a result is shown or sent; the supplier register's names,
tax ids and IBANs, sealed with keyed hashes beside them, opened where master data is
read), and none of the IBANs; the duplicate check's index holds keyed hashes only.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from benchmarks.invoices.variants import Variant
from pipeline.api import create_app
from pipeline.api.console.views import ConsoleViews
from pipeline.data_keys import DataKeys, document_subject, rotate_kek, shred_tenant_keys
from pipeline.delivery import delivery_settle_hook
from pipeline.envelope import ARMOR, LocalKeyProvider
from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable
from pipeline.extraction import answer_for
from pipeline.jobs import JobStore
from pipeline.sealed_results import jsonb_text, open_body, open_result, seal_result
from pipeline.settings import Settings
from pipeline.tenants import list_suppliers, load_master_data, permit_currencies, upsert_supplier
from pipeline.tenants.accounts import Principal
from pipeline.tenants.supplier_ibans import iban_key
from tests.support.api import (
    TenantKey,
    asgi_client,
    loopback_server,
    settings_for,
    tenant_with_key,
)
from tests.support.console import console_login, correction_form, job_page
from tests.support.delivery import dispatcher_for, postings, registry_for, reserve_receiver
from tests.support.drivers import run_document_driver
from tests.support.erasure import table_hits
from tests.support.file_review import file_awaiting_review
from tests.support.jobs import new_tenant, request
from tests.support.pdfs import text_pdf

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()
JOBS = "/v1/extraction-jobs"
KEK_A = base64.b64encode(bytes(range(32))).decode()
KEK_B = base64.b64encode(bytes(range(100, 132))).decode()
#: Text printed on the invoices only (no stage copies it into a result).
NOTE_FILE = "Gate note: unload at dock QX-ORCHID-5521"
NOTE_TEXT = "Gate note: unload at dock QX-LILAC-7730"


def _invoice(seed: int) -> GeneratedInvoice:
    return generate_invoice(seed, languages=("en",), max_line_items=3, anchor=TODAY)


async def _master_data(
    pool: asyncpg.Pool, tk: TenantKey, *invs: GeneratedInvoice, keys: DataKeys | None = None
) -> None:
    async with pool.acquire() as conn:
        for inv in invs:
            await upsert_supplier(conn, tk.tenant.id, inv.supplier, keys=keys)
        await permit_currencies(conn, tk.tenant.id, {inv.currency for inv in invs})


def _pg_dump(dsn: str, *options: str) -> str:
    done = subprocess.run(
        ["pg_dump", "--no-owner", *options, "--dbname", dsn],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


async def test_after_jobs_run_pg_dump_holds_no_document_text_in_plaintext(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """Two invoices (a text-layer PDF and a pasted text) run to SUCCEEDED and are
    delivered to the reference ERP: the dump holds neither their text nor their IBANs
    (the supplier register's included), while validation found each IBAN on file, the
    ERP received each IBAN in plaintext and the result API shows it."""
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    on_file, pasted = _invoice(11), _invoice(12)
    file_text = f"{on_file.ocr_text}\n{NOTE_FILE}"
    pasted_text = f"{pasted.ocr_text}\n{NOTE_TEXT}"
    tk = await tenant_with_key(pool)
    await _master_data(pool, tk, on_file, pasted, keys=DataKeys.from_settings(settings))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        r = await client.post(
            JOBS, files={"document": ("a.pdf", text_pdf(file_text))}, headers=tk.headers
        )
        assert r.status_code == 202, r.text
        r = await client.post(JOBS, json={"document": {"text": pasted_text}}, headers=tk.headers)
        assert r.status_code == 202, r.text

    def answer(req: dict[str, Any]) -> Any:
        prompt = str(req)
        assert on_file.truth.invoice_number and pasted.truth.invoice_number
        if on_file.truth.invoice_number.value in prompt:
            return answer_for(on_file.candidate, file_text)
        return answer_for(pasted.candidate, pasted_text)

    store = JobStore(pool, Settings(lease_seconds=30, kek=KEK_A))
    store.settle_hooks.add(delivery_settle_hook)
    with receiver as erp:
        rows, calls = await run_document_driver(pool, settings, 2, store=store, answer=answer)
        # the worker opened both texts (a sealed prompt would have extracted nothing)
        # and the register's IBANs (a sealed one matches no invoice's IBAN on file)
        assert sorted(r["state"] for r in rows.values()) == ["SUCCEEDED", "SUCCEEDED"], rows
        assert calls == 2
        dispatcher = dispatcher_for(pool, keys=DataKeys.from_settings(settings))
        try:
            assert (await dispatcher.run_once()).count("delivered") == 2
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == dict.fromkeys(rows, 1)
    async with asgi_client(app) as client:
        shown = {
            job: (await client.get(f"{JOBS}/{job}/result", headers=tk.headers)).json()
            for job in rows
        }
    async with pool.acquire() as conn:
        received = {
            r["job_id"]: r["invoice"]
            for r in await conn.fetch("SELECT job_id, invoice FROM erp_postings")
        }

    # Left out of the dump: the reference ERP's tables (the third party's copy of what
    # it received; they share the test database).
    dump = _pg_dump(dsn, "--exclude-table-data=erp_*")
    text_only = [NOTE_FILE, NOTE_TEXT, "Northfield Retail Ltd"]  # the customer: printed only
    for needle in text_only:
        assert needle not in dump, needle
    for inv in (on_file, pasted):
        t = inv.truth
        assert t.iban and t.invoice_number
        printed_iban = " ".join(t.iban.value[i : i + 4] for i in range(0, len(t.iban.value), 4))
        assert t.iban.value not in dump and printed_iban not in dump
        hits = await table_hits(pool, [t.invoice_number.value, t.iban.value, printed_iban])
        assert hits[t.iban.value] == hits[printed_iban] == [], hits
        # the invoice number is sealed with the rest of the result's text
        assert hits[t.invoice_number.value] == [], hits
        # the ERP received the IBAN, and the result API shows it, both opened
        job = next(
            j
            for j in rows
            if shown[j]["result"]["invoice_number"]["value"] == (t.invoice_number.value)
        )
        assert shown[job]["result"]["iban"]["value"] == t.iban.value
        assert received[job]["iban"]["value"] == t.iban.value
        assert received[job]["iban"] == shown[job]["result"]["iban"]
    # the duplicate check's index holds keyed hashes, not the invoice's identity
    async with pool.acquire() as conn:
        identities = await conn.fetch(
            "SELECT supplier, invoice_number, gross_total FROM invoice_identities"
        )
    assert len(identities) == 2
    assert all(len(v) == 64 and int(v, 16) >= 0 for row in identities for v in row.values())
    # the supplier register holds each IBAN sealed, beside its keyed hash
    async with pool.acquire() as conn:
        register = await conn.fetch(
            "SELECT ibans, iban_keys FROM suppliers WHERE tenant_id = $1", tk.tenant.id
        )
        listed = await list_suppliers(conn, tk.tenant.id, keys=DataKeys.from_settings(settings))
    assert len(register) == 2
    for row in register:
        [sealed], [key] = row["ibans"], row["iban_keys"]
        assert sealed.startswith(ARMOR)
        assert re.fullmatch(r"1:[0-9a-f]{64}", key), key
    assert sorted(i for r in listed for i in r.ibans) == sorted(
        inv.truth.iban.value for inv in (on_file, pasted) if inv.truth.iban
    )


async def test_sealed_text_bytes_moved_to_another_tenant_do_not_open(pool: asyncpg.Pool) -> None:
    keys = DataKeys(LocalKeyProvider([base64.b64decode(KEK_A)]))
    one, two = await new_tenant(pool), await new_tenant(pool)
    subject = document_subject("ab" * 32)
    async with pool.acquire() as conn:
        sealed = await keys.seal_text(conn, one.id, "IBAN BE60 4180 0686 7539", subject)
        await keys.seal_text(conn, two.id, "other", subject)  # the other tenant has a key too
        assert "BE60" not in sealed and sealed.startswith(ARMOR)
        assert await keys.open_text(conn, one.id, sealed, subject) == "IBAN BE60 4180 0686 7539"
        with pytest.raises(DataKeyUnavailable, match="does not authenticate"):
            await keys.open_text(conn, two.id, sealed, subject)
        with pytest.raises(DataKeyUnavailable, match="does not authenticate"):
            await keys.open_text(conn, one.id, sealed, document_subject("cd" * 32))
        # a value written before sealing was on reads as it is
        assert await keys.open_text(conn, one.id, "plain words", subject) == "plain words"


async def test_kek_rotation_rewraps_data_keys_and_rewrites_no_data(
    pool: asyncpg.Pool, dsn: str
) -> None:
    a, b = base64.b64decode(KEK_A), base64.b64decode(KEK_B)
    old = JobStore(pool, Settings(kek=KEK_A))
    tenant = await new_tenant(pool)
    job = await old.accept(request(tenant, text="INVOICE R-1 pay to BE60 4180 0686 7539"))
    async with pool.acquire() as conn:
        before = await conn.fetchrow(
            "SELECT d.sha256, d.content, k.kek_id, k.wrapped FROM documents d"
            " JOIN extraction_jobs j ON j.document_id = d.id"
            " JOIN tenant_data_keys k ON k.tenant_id = d.tenant_id WHERE j.id = $1",
            job.job_id,
        )
    assert before["kek_id"] == LocalKeyProvider([a]).current_kek_id
    assert before["content"].startswith(ARMOR) and "BE60" not in before["content"]

    # the CLI, with the new KEK first and the old one after it
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "FENCELINE_KEK": f"{KEK_B},{KEK_A}"}
    env.pop("FENCELINE_KEK_FILE", None)
    done = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "--database-url", dsn, "data-keys", "rotate"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert '"rewrapped": 1' in done.stdout
    # nothing left to do: a second run re-wraps nothing
    assert await rotate_kek(pool, LocalKeyProvider([b, a])) == 0

    async with pool.acquire() as conn:
        after = await conn.fetchrow(
            "SELECT d.content, k.kek_id, k.wrapped, k.rewrapped_at FROM documents d"
            " JOIN tenant_data_keys k ON k.tenant_id = d.tenant_id WHERE d.sha256 = $1",
            before["sha256"],
        )
        subject = document_subject(before["sha256"])
        assert after["content"] == before["content"]  # the data was not rewritten
        assert after["wrapped"] != before["wrapped"] and after["rewrapped_at"] is not None
        assert after["kek_id"] == LocalKeyProvider([b]).current_kek_id
        # the new KEK alone opens it; the old KEK alone no longer does
        plain = await DataKeys(LocalKeyProvider([b])).open_text(
            conn, tenant.id, after["content"], subject
        )
        assert plain == "INVOICE R-1 pay to BE60 4180 0686 7539"
        with pytest.raises(DataKeyNotHere, match="not configured here"):
            await DataKeys(LocalKeyProvider([a])).open_text(
                conn, tenant.id, after["content"], subject
            )


async def test_a_shredded_data_key_makes_the_tenants_text_unreadable_at_once(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = Settings(kek=KEK_A, lease_seconds=30)
    store = JobStore(pool, settings)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, text="INVOICE S-1 total 10.00 EUR"))
    reader = DataKeys.from_settings(settings)  # another process's keys, already warm
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT d.sha256, d.content FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            job.job_id,
        )
        subject = document_subject(row["sha256"])
        assert await reader.open_text(conn, tenant.id, row["content"], subject) == (
            "INVOICE S-1 total 10.00 EUR"
        )
        assert await shred_tenant_keys(conn, tenant.id) == [1]
        assert await shred_tenant_keys(conn, tenant.id) == []  # once
        with pytest.raises(DataKeyShredded, match="shredded") as caught:
            await reader.open_text(conn, tenant.id, row["content"], subject)
        assert caught.value.version == 1

    # the worker's attempt fails terminally, saying why; it never reads garbage
    rows, calls = await run_document_driver(
        pool, settings_for(dsn, state_dir=tmp_path, kek=KEK_A), 1, store=store
    )
    assert calls == 0
    assert rows[job.job_id]["state"] == "FAILED_TERMINAL"
    async with pool.acquire() as conn:
        error = await conn.fetchval(
            "SELECT error_class FROM job_attempts WHERE job_id = $1", job.job_id
        )
    assert error == "data_key_shredded"

    # the tenant's next job gets a new data key; the shredded one stays shredded
    again = await store.accept(request(tenant, text="INVOICE S-2 total 20.00 EUR"))
    async with pool.acquire() as conn:
        versions = await conn.fetch(
            "SELECT version, wrapped IS NULL AS shredded FROM tenant_data_keys"
            " WHERE tenant_id = $1 ORDER BY version",
            tenant.id,
        )
        assert [(v["version"], v["shredded"]) for v in versions] == [(1, True), (2, False)]
        content = await conn.fetchval(
            "SELECT d.content FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            again.job_id,
        )
        assert content.startswith(f"{ARMOR}2:")


async def test_the_tenant_wide_erasure_shreds_the_tenants_data_keys(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    tk = await tenant_with_key(pool, scopes=("jobs", "operator"))
    other = await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for who in (tk, other):
            for n in range(2):
                body = {"document": {"text": f"INVOICE E-{n} {uuid.uuid4().hex}"}}
                r = await client.post(JOBS, json=body, headers=who.headers)
                assert r.status_code == 202, r.text
        erase = {"confirm_tenant": str(tk.tenant.id), "max_jobs": 1}
        first = (await client.post("/v1/tenant-erasures", json=erase, headers=tk.headers)).json()
        assert first["remaining"] == 1 and first["keys_shredded"] == []  # not yet: one left
        last = (await client.post("/v1/tenant-erasures", json=erase, headers=tk.headers)).json()
        assert last["complete"] is True and last["keys_shredded"] == [1]
    async with pool.acquire() as conn:
        keys = await conn.fetch(
            "SELECT tenant_id, wrapped IS NULL AS shredded FROM tenant_data_keys"
            " WHERE tenant_id = ANY($1::uuid[])",
            [tk.tenant.id, other.tenant.id],
        )
    assert {(k["tenant_id"], k["shredded"]) for k in keys} == {
        (tk.tenant.id, True),
        (other.tenant.id, False),  # another tenant's key is untouched
    }


async def test_the_console_reads_the_sealed_text_and_says_so_once_it_is_shredded(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job = await file_awaiting_review(pool, c, tk, settings=settings)
        await console_login(c, tk)
        html, csrf = await job_page(c, job.job_id)
        png = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
        # a server started without the KEK cannot open it: a 503 naming the cause (a
        # deployment fault, retried by a worker), never the sealed bytes or a bare 500
        keyless = create_app(settings_for(dsn, state_dir=tmp_path), pool=pool)
        async with (
            loopback_server(keyless) as other,
            httpx.AsyncClient(base_url=other, timeout=30) as k,
        ):
            await console_login(k, tk)
            png_keyless = await k.get(f"/console/jobs/{job.job_id}/pages/1.png")
        assert png_keyless.status_code == 503, png_keyless.text
        assert png_keyless.json()["reason"] == "content_key_unavailable"
        async with pool.acquire() as conn:
            stored = await conn.fetchval(
                "SELECT t.content FROM document_texts t JOIN extraction_jobs j"
                " ON j.document_id = t.document_id WHERE j.id = $1",
                job.job_id,
            )
            assert await shred_tenant_keys(conn, tk.tenant.id) == [1]
        after, _ = await job_page(c, job.job_id)
        png_after = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
        correct = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, gross_total=job.right_gross),
        )
    assert stored.startswith(ARMOR)
    # before: the page shows the text the file was read as (opened), boxes on the image
    first_line = next(line for line in job.kept_text.splitlines() if line.strip())
    assert escape(first_line.strip()) in html and ARMOR not in html
    assert '<details class="text-view">' in html and png.status_code == 200
    # after: the page says the text was shredded; the image and a correction are 410
    # (the result's values, sealed like the text, are not shown either)
    assert "was destroyed" in after and ARMOR not in after
    assert job.invoice.truth.iban is not None
    assert job.invoice.truth.iban.value in html and job.invoice.truth.iban.value not in after
    assert job.wrong_gross in html and job.wrong_gross not in after  # the (wrong) gross
    assert after.count(escape(first_line.strip())) < html.count(escape(first_line.strip()))
    assert png_after.status_code == 410 and "shredded" in png_after.text
    assert correct.status_code == 410 and "shredded" in correct.text


#: A result's IBAN as a driver settles it (the evidence's quote keeps the print form).
IBAN = "BE60418006867539"
PRINTED_IBAN = "BE60 4180 0686 7539"


def _result(number: str) -> dict[str, Any]:
    quote = {"page": 1, "start": 20, "end": 39, "quote": PRINTED_IBAN}
    return {
        "invoice_number": {"value": number, "evidence": {**quote, "start": 8, "end": 11}},
        "iban": {"value": IBAN, "evidence": quote},
    }


async def test_a_results_iban_is_sealed_opened_where_shown_and_shredded_with_the_key(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """The IBAN of a settled result is sealed at rest and opened by the result API and
    ``explain``; a result written before sealing reads as it is; once the tenant's data
    key is shredded the result answers 410 ``content_shredded``, ``explain`` says so,
    and a delivery not yet sent fails instead of sending the token."""
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    tk = await tenant_with_key(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    sealing = JobStore(pool, Settings(kek=KEK_A, lease_seconds=30))
    # as before sealing results (no KEK, whatever FENCELINE_KEK this run has)
    unsealed = JobStore(pool, Settings(lease_seconds=30, kek=None, kek_file=None))
    jobs = {}
    for name, store in (("sealed", sealing), ("legacy", unsealed)):
        store.settle_hooks.add(delivery_settle_hook)
        job = await store.accept(request(tk.tenant, text=f"INVOICE R-{name} pay {PRINTED_IBAN}"))
        [lease] = await store.claim("w")
        await store.succeed(lease, result=_result(f"R-{name}"))
        jobs[name] = job.job_id
    async with pool.acquire() as conn:
        stored = {
            r["job_id"]: r["result"]
            for r in await conn.fetch("SELECT job_id, result FROM extraction_results")
        }
        bodies = {
            r["job_id"]: bytes(r["body"])
            for r in await conn.fetch("SELECT job_id, body FROM deliveries")
        }
    sealed_iban = stored[jobs["sealed"]]["iban"]
    assert sealed_iban.startswith(ARMOR) and "BE60" not in sealed_iban
    assert IBAN.encode() not in bodies[jobs["sealed"]]
    assert sealed_iban.encode() in bodies[jobs["sealed"]]
    assert stored[jobs["legacy"]]["iban"]["value"] == IBAN  # plaintext, as written then

    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        before = {
            n: await client.get(f"{JOBS}/{j}/result", headers=tk.headers) for n, j in jobs.items()
        }
        opened = await sealing.explain(jobs["sealed"])
        async with pool.acquire() as conn:
            assert await shred_tenant_keys(conn, tk.tenant.id) == [1]
        after = await client.get(f"{JOBS}/{jobs['sealed']}/result", headers=tk.headers)
    for response in before.values():
        assert response.status_code == 200, response.text
        assert response.json()["result"]["iban"] == _result("x")["iban"]
    assert after.status_code == 410, after.text
    assert after.json()["reason"] == "content_shredded"
    assert IBAN not in after.text and ARMOR not in after.text

    [iban] = [f for f in opened["result"]["fields"] if f["field"] == "iban"]
    assert (iban["value"], iban["evidence"]["quote"]) == (IBAN, PRINTED_IBAN)
    explained = await sealing.explain(jobs["sealed"])
    [field] = [f for f in explained["result"]["fields"] if f["field"] == "invoice_number"]
    assert field["value"].startswith("[shredded")  # sealed like the IBAN: marked, not raised
    assert IBAN not in str(explained) and ARMOR not in str(explained["result"])

    # the sealed result's delivery cannot be opened any more: it fails, never sending
    # the token; the one written before sealing is delivered as it was
    with receiver as erp:
        dispatcher = dispatcher_for(pool, keys=DataKeys.from_settings(settings))
        try:
            report = await dispatcher.run_once()
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == {jobs["legacy"]: 1}
    assert report.count("delivered") == 1, report
    async with pool.acquire() as conn:
        failed = await conn.fetchrow(
            "SELECT state, final_reason FROM deliveries WHERE job_id = $1", jobs["sealed"]
        )
    assert dict(failed) == {"state": "failed", "final_reason": "data_key_shredded"}


async def test_a_corrected_iban_is_sealed_in_the_correction_and_shown_opened(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """A reviewer removes a result's IBAN in the console: the correction's before
    value is sealed at rest like the result's, and the console and ``explain`` show
    it opened."""
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job = await file_awaiting_review(pool, c, tk, settings=settings)
        assert job.invoice.truth.iban is not None
        iban = job.invoice.truth.iban.value
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        saved = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, iban=""),
        )
        assert saved.status_code in (200, 303), saved.text
        html, _ = await job_page(c, job.job_id)
    async with pool.acquire() as conn:
        [changes] = await conn.fetch(
            "SELECT changes FROM review_corrections WHERE job_id = $1", job.job_id
        )
    [change] = [ch for ch in changes["changes"] if ch["field"] == "iban"]
    assert change["before"].startswith(ARMOR) and change["after"] is None
    assert (await table_hits(pool, [iban]))[iban] == []
    assert f"iban {iban}" in html and ARMOR not in html
    explained = await JobStore(pool, Settings(kek=KEK_A)).explain(job.job_id)
    [correction] = explained["corrections"]
    assert [ch["before"] for ch in correction["changes"] if ch["field"] == "iban"] == [iban]


#: A direct debit's debited account (the buyer's, EN 16931 BT-91) and its mandate, as the
#: e-invoice reader writes them (evidence an XML path).
DEBITED = "DE02120300000000202051"


def _debit_result(number: str) -> dict[str, Any]:
    def xml(path: str) -> dict[str, Any]:
        return {"page": 0, "start": 0, "end": 0, "quote": path, "match": "xml"}

    return {
        "invoice_number": {"value": number, "evidence": xml("/ubl:Invoice/cbc:ID")},
        "payment_means": {"value": "59", "evidence": xml("/ubl:Invoice/cac:PaymentMeans")},
        "mandate_reference": {"value": "M-29901-1", "evidence": xml("/ubl:Invoice/m/cbc:ID")},
        "debited_account": {"value": DEBITED, "evidence": xml("/ubl:Invoice/m/a/cbc:ID")},
    }


async def test_a_direct_debits_account_is_sealed_as_the_iban_is(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """The account a direct debit debits is sealed at rest in the result and its delivery
    body, whole, and opened by the result API and ``explain``; the mandate reference is
    sealed as every text of a result is."""
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    tk = await tenant_with_key(pool)
    await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    store = JobStore(pool, Settings(kek=KEK_A, lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    job = await store.accept(request(tk.tenant, text="INVOICE R-debit"))
    [lease] = await store.claim("w")
    await store.succeed(lease, result=_debit_result("R-debit"))
    async with pool.acquire() as conn:
        stored = await conn.fetchval(
            "SELECT result FROM extraction_results WHERE job_id = $1", job.job_id
        )
        body = bytes(
            await conn.fetchval("SELECT body FROM deliveries WHERE job_id = $1", job.job_id)
        )
    assert stored["debited_account"].startswith(ARMOR) and "DE02" not in stored["debited_account"]
    assert stored["mandate_reference"]["value"].startswith(ARMOR)  # text, sealed leaf by leaf
    assert stored["mandate_reference"]["evidence"]["start"] == 0  # numbers stay open
    assert DEBITED.encode() not in body and stored["debited_account"].encode() in body
    assert (await table_hits(pool, [DEBITED]))[DEBITED] == []
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        response = await client.get(f"{JOBS}/{job.job_id}/result", headers=tk.headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["debited_account"] == _debit_result("x")["debited_account"]
    explained = await store.explain(job.job_id)
    [field] = [f for f in explained["result"]["fields"] if f["field"] == "debited_account"]
    assert field["value"] == DEBITED


async def test_the_sealed_iban_text_is_written_as_postgresql_writes_jsonb(
    pool: asyncpg.Pool,
) -> None:
    """The dispatcher puts the sealed JSON text in the body in place of its token, so
    a delivered body is byte for byte the one an unsealed result would have given."""
    nodes = [
        _result("x")["iban"],
        {"value": IBAN, "evidence": {"page": 2, "start": 0, "end": 4, "quote": 'Ä "q"\\\t\x01'}},
        {"value": IBAN, "evidence": {"quote": "/x:IBAN", "match": "xml", "line": None}},
    ]
    async with pool.acquire() as conn:
        for node in nodes:
            assert jsonb_text(node) == await conn.fetchval("SELECT $1::jsonb::text", node)


async def test_the_supplier_register_seals_its_ibans_and_converts_old_rows(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """IBANs, names and tax ids on file written before sealing read as they are;
    ``fenceline suppliers seal`` seals them, the IBANs and ids with their keyed hashes;
    ``fenceline suppliers add`` and ``list`` seal and open, and adding a supplier again
    finds it by its VAT id's keyed hash; shredding the tenant's data keys leaves the
    register unreadable."""
    keys = DataKeys(LocalKeyProvider([base64.b64decode(KEK_A)]))
    tenant, other = await new_tenant(pool), await new_tenant(pool)
    old, new = _invoice(21).supplier, _invoice(22).supplier
    (old_iban,), (new_iban,) = old.ibans, new.ibans
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tenant.id, old)  # no KEK: stored as it is
        await upsert_supplier(conn, other.id, old, keys=keys)
        row = await conn.fetchrow(
            "SELECT ibans, iban_keys FROM suppliers WHERE tenant_id = $1", tenant.id
        )
    assert (row["ibans"], row["iban_keys"]) == ([old_iban], [])

    cli = [sys.executable, "-m", "cluster.cli", "--database-url", dsn]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "FENCELINE_KEK": KEK_A}
    env.pop("FENCELINE_KEK_FILE", None)

    def fenceline(*args: str) -> str:
        """Run ``fenceline ARGS`` with the KEK; its stdout (it must exit 0)."""
        done = subprocess.run(
            [*cli, *args], capture_output=True, text=True, env=env, check=False, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    fenceline(
        "suppliers", "add", "--tenant", tenant.name, new.name,
        "--vat-id", str(new.vat_id), "--iban", new_iban,
    )  # fmt: skip
    assert json.loads(fenceline("suppliers", "seal"))["sealed"] >= 1
    listed = fenceline("suppliers", "list", "--tenant", tenant.name, "--json")
    assert sorted(i for s in json.loads(listed) for i in s["ibans"]) == sorted([old_iban, new_iban])
    assert [(s["name"], s["vat_id"]) for s in json.loads(listed)] == sorted(
        (s.name, s.vat_id) for s in (old, new)
    )
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tenant.id, new, keys=keys)  # again: the same row
        register = await conn.fetch(
            "SELECT name, vat_id, vat_id_sealed FROM suppliers WHERE tenant_id = $1", tenant.id
        )
    assert len(register) == 2
    for r in register:
        assert r["name"].startswith(ARMOR) and r["vat_id_sealed"].startswith(ARMOR)
        assert re.fullmatch(r"1:[0-9a-f]{64}", r["vat_id"]), r["vat_id"]

    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT ibans, iban_keys FROM suppliers WHERE tenant_id = $1", tenant.id
        )
        mine = await iban_key(keys, conn, tenant.id, old_iban)
        theirs = await conn.fetchval(
            "SELECT iban_keys[1] FROM suppliers WHERE tenant_id = $1", other.id
        )
        assert (await table_hits(pool, [old_iban, new_iban])) == {old_iban: [], new_iban: []}
        assert all(v.startswith(ARMOR) for r in rows for v in r["ibans"])
        # an equality lookup by keyed hash finds the supplier; another tenant's hash differs
        found = await conn.fetchval(
            "SELECT count(*) FROM suppliers WHERE tenant_id = $1 AND $2 = ANY (iban_keys)",
            tenant.id,
            mine,
        )
        assert found == 1 and mine != theirs
        master = await load_master_data(conn, tenant.id, keys=keys)
        assert {i for s in master.suppliers for i in s.ibans} == {old_iban, new_iban}
        await shred_tenant_keys(conn, tenant.id)
        with pytest.raises(DataKeyShredded):
            await load_master_data(conn, tenant.id, keys=keys)


#: Several kinds of invoice (language, layout, and variants a reviewer sees): each
#: (seed, variant, language, layout); the first is uploaded as a PDF, the others pasted.
KINDS = (
    (41, Variant.CLEAN, "en", "table"),
    (42, Variant.CLEAN, "de", "keyvalue"),
    (43, Variant.CLEAN, "fr", "prose"),
    (44, Variant.ARITHMETIC_OFF_BY_CENT, "it", "ledger"),
    (45, Variant.INVENTED_IBAN, "nl", "columns"),
    (46, Variant.CLEAN, "pl", "stacked"),
)
#: A line of an invoice's text is looked for when it has this many characters and a
#: letter: shorter ones, and lines of only digits, dates and amounts ("12.03.2026",
#: "1,234.56"), are not text that names anyone or anything (docs/data-lifecycle.md).
MIN_LINE = 12


def text_lines(text: str) -> list[str]:
    """The lines of an invoice's text the dump must not hold."""
    lines = (line.strip() for line in text.splitlines())
    return [x for x in lines if len(x) >= MIN_LINE and any(c.isalpha() for c in x)]


def iban_forms(iban: str) -> tuple[str, str]:
    """An IBAN compact and as printed (groups of four)."""
    return iban, " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))


async def test_pg_dump_holds_no_line_of_any_invoices_text(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """Invoices of several kinds run through the real pipeline with a KEK (worker,
    validation, duplicate check, review, delivery): ``pg_dump`` holds none of their
    IBANs, compact or printed, and none of the lines of their text, the results'
    evidence quotes, descriptions, supplier names and invoice numbers included; the
    result API, the console's queue and the ERP still read them open."""
    settings = settings_for(dsn, state_dir=tmp_path, kek=KEK_A)
    invoices = [
        generate_invoice(
            seed, variant, languages=(lang,), layouts=(layout,), max_line_items=4, anchor=TODAY
        )
        for seed, variant, lang, layout in KINDS
    ]
    tk = await tenant_with_key(pool)
    await _master_data(pool, tk, *invoices, keys=DataKeys.from_settings(settings))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        for n, inv in enumerate(invoices):
            if n == 0:
                doc: dict[str, Any] = {"files": {"document": ("a.pdf", text_pdf(inv.ocr_text))}}
            else:
                doc = {"json": {"document": {"text": inv.ocr_text}}}
            r = await client.post(JOBS, headers=tk.headers, **doc)
            assert r.status_code == 202, r.text

    def answer(req: dict[str, Any]) -> Any:
        prompt = str(req)
        for inv in invoices:
            assert inv.truth.invoice_number
            if inv.truth.invoice_number.value in prompt:
                return answer_for(inv.candidate, inv.ocr_text)
        raise AssertionError("a prompt of no invoice")

    store = JobStore(pool, Settings(lease_seconds=30, kek=KEK_A))
    store.settle_hooks.add(delivery_settle_hook)
    with receiver:
        rows, calls = await run_document_driver(
            pool, settings, len(invoices), store=store, answer=answer
        )
        states = sorted(r["state"] for r in rows.values())
        assert calls == len(invoices)
        assert "SUCCEEDED" in states and "REVIEW_REQUIRED" in states, states
        dispatcher = dispatcher_for(pool, keys=DataKeys.from_settings(settings))
        try:
            assert (await dispatcher.run_once()).count("delivered") == states.count("SUCCEEDED")
        finally:
            await dispatcher.close()
    async with asgi_client(app) as client:
        shown = {
            job: (await client.get(f"{JOBS}/{job}/result", headers=tk.headers)).json()
            for job in rows
        }
    async with pool.acquire() as conn:
        received = [
            r["invoice"]
            for r in await conn.fetch(
                "SELECT invoice FROM erp_postings WHERE job_id = ANY($1::uuid[])", list(rows)
            )
        ]
    numbers = {inv.truth.invoice_number.value for inv in invoices if inv.truth.invoice_number}
    # read open where the product reads them: the result API, the ERP, the console
    assert {s["result"]["invoice_number"]["value"] for s in shown.values()} == numbers
    assert {r["invoice_number"]["value"] for r in received} <= numbers and received
    me = Principal(tk.key_id, tk.tenant.id, "t", frozenset())
    queue, _ = await ConsoleViews(pool, store, settings).queue(me, reason=None, supplier=None)
    assert {item.invoice_number for item in queue} <= numbers and queue
    name = queue[0].supplier
    assert name and not name.startswith(ARMOR)
    found, _ = await ConsoleViews(pool, store, settings).queue(
        me,
        reason=None,
        supplier=name[1:-1].upper(),
    )
    assert [i.job_id for i in found] == [i.job_id for i in queue if i.supplier == name]

    dump = _pg_dump(dsn, "--exclude-table-data=erp_*")
    leaks: dict[str, list[str]] = {}
    for inv in invoices:
        ibans = [i.value for i in (inv.truth.iban, inv.candidate.iban) if i]
        needles = [*(f for i in ibans for f in iban_forms(i)), *text_lines(inv.ocr_text)]
        for needle in needles:
            if needle in dump:
                leaks.setdefault(f"seed {inv.seed}", []).append(needle)
    assert sum(len(text_lines(inv.ocr_text)) for inv in invoices) > 60
    hits = await table_hits(pool, [n for v in leaks.values() for n in v])
    assert leaks == {}, json.dumps(hits)


async def test_an_opened_delivery_body_is_the_one_an_unsealed_result_gives(
    pool: asyncpg.Pool,
) -> None:
    """A credit note's body, rendered in SQL as deliveries.sql renders it (the preceding
    invoice's number twice: in the result and in ``credited_invoice``), from the sealed
    result and opened by :func:`open_body`, is byte for byte the body the unsealed result
    renders to; :func:`open_result` gives the result back."""
    keys = DataKeys(LocalKeyProvider([base64.b64decode(KEK_A)]))
    tenant, job = await new_tenant(pool), uuid.uuid4()
    result = {
        **_result("CN-7"),
        "document_type": "credit_note",
        "preceding_invoice": {"number": 'R-"1"\\Ä\t', "evidence": {"page": 1, "quote": "Ref R"}},
        "line_items": [{"description": {"value": "Café ☕ 2×", "evidence": None}, "qty": 2}],
        "uncertain_fields": ["line_items[0]"],
    }
    render = (
        "SELECT convert_to(jsonb_build_object('type', 'x', 'data', jsonb_build_object("
        "'result', $1::jsonb, 'credited_invoice', jsonb_build_object("
        "'invoice_number', $1::jsonb->'preceding_invoice'->>'number')))::text, 'UTF8')"
    )
    async with pool.acquire() as conn:
        sealed = await seal_result(keys, conn, tenant.id, job, result)
        assert sealed["document_type"] == "credit_note"  # SQL reads it
        assert sealed["uncertain_fields"] == ["line_items[0]"]
        assert sealed["line_items"][0]["qty"] == 2 and "Caf" not in json.dumps(sealed)
        assert sealed["preceding_invoice"]["number"].startswith(ARMOR)
        plain_body = bytes(await conn.fetchval(render, result))
        sealed_body = bytes(await conn.fetchval(render, sealed))
        assert b"R-" not in sealed_body
        assert await open_body(keys, conn, tenant.id, job, sealed_body) == plain_body
        assert await open_result(keys, conn, tenant.id, job, sealed) == result
        with pytest.raises(DataKeyUnavailable):  # bound to its job
            await open_result(keys, conn, tenant.id, uuid.uuid4(), sealed)
