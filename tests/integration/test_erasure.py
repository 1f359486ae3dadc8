"""Erasure of a job's content (issue 46, item 2), against the real PostgreSQL, the
embedded document store and the real worker path.

The target: after an erasure no copy of the erased text, IBAN or values remains in
any table or in the object store (every column of every table, cast to text, and
every file of the store are scanned for strings of the invoice), and the audit
skeleton still explains the job. Plus: another tenant's key gets 404, a job in flight
is cancelled first (its late result is stale), a document or stored file another job
still needs is kept until that job is erased too, erasing twice answers the same
tombstone, and the operator's tenant-wide erasure through the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import asyncpg
import httpx
import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from pipeline.api import create_app
from pipeline.data_keys import DataKeys
from pipeline.delivery import delivery_settle_hook
from pipeline.documents import FolderStore
from pipeline.errors import LeaseLost
from pipeline.extraction import answer_for
from pipeline.jobs import EraseRequest, JobStore, erase_job, render_explain
from pipeline.settings import Settings
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import (
    TenantKey,
    add_key,
    asgi_client,
    assert_problem,
    loopback_server,
    settings_for,
    tenant_with_key,
)
from tests.support.console import (
    approve_line_amount,
    invoice_awaiting_review,
    misread_line_amount,
)
from tests.support.delivery import dispatcher_for, postings, registry_for, reserve_receiver
from tests.support.drivers import run_document_driver
from tests.support.erasure import OPENED_PLACES, content_hits, sealed_places, store_hits
from tests.support.jobs import new_tenant, request
from tests.support.pdfs import text_pdf

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()
JOBS = "/v1/extraction-jobs"


def _invoice(seed: int = 9) -> GeneratedInvoice:
    return generate_invoice(seed, languages=("en",), max_line_items=3, anchor=TODAY)


def _needles(inv: GeneratedInvoice) -> tuple[list[str], list[str]]:
    """Strings of the invoice: (content only, also in the tenant's supplier register).

    The supplier's name and IBAN are also the tenant's own master data (the
    ``suppliers`` table, which validation checks against): not a copy of the invoice."""
    t = inv.truth
    assert t.invoice_number and t.iban and t.supplier.name and t.gross_total
    item = t.line_items[0]
    content = [
        t.invoice_number.value,
        item.description,
        str(item.line_amount),
        str(t.gross_total.value),
        "Northfield Retail Ltd",  # the customer, printed on the invoice only
    ]
    printed_iban = " ".join(t.iban.value[i : i + 4] for i in range(0, len(t.iban.value), 4))
    master = [t.supplier.name.value, t.iban.value, printed_iban]
    return content, master


async def _with_master_data(pool: asyncpg.Pool, tk: TenantKey, inv: GeneratedInvoice) -> None:
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tk.tenant.id, inv.supplier)
        await permit_currencies(conn, tk.tenant.id, {inv.currency})


def _keys() -> DataKeys:
    """The keys this run's processes hold: sealing when ``FENCELINE_KEK`` is set."""
    return DataKeys.from_settings(Settings())


async def _hits(pool: asyncpg.Pool, needles: list[str]) -> dict[str, list[str]]:
    """The places holding each needle, in plaintext or in a sealed value opened."""
    hits = await content_hits(pool, _keys(), needles)
    return {n: places for n, places in hits.items() if places}


async def _scan(pool: asyncpg.Pool, root: Path, inv: GeneratedInvoice) -> dict[str, list[str]]:
    """Every place (table.column or store file) holding a string of ``inv``, in
    plaintext or sealed (opened as the product opens it)."""
    content, master = _needles(inv)
    hits = await content_hits(pool, _keys(), content)
    hits.update(await content_hits(pool, _keys(), master, skip=frozenset({"suppliers"})))
    for needle, files in store_hits(root, content + master).items():
        hits[needle] = hits.get(needle, []) + [f"store:{f}" for f in files]
    return {n: places for n, places in hits.items() if places}


async def _count(pool: asyncpg.Pool, sql: str, *args: object) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval(sql, *args))


async def test_after_erasure_no_copy_remains_in_any_table_or_the_store(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    inv = _invoice()
    settings = settings_for(dsn, state_dir=tmp_path)
    tk = await tenant_with_key(pool)
    other = await tenant_with_key(pool)
    await _with_master_data(pool, tk, inv)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        r = await client.post(
            JOBS,
            files={"document": ("Brabant-invoice.pdf", text_pdf(inv.ocr_text))},
            headers=tk.headers,
        )
        assert r.status_code == 202, r.text
        job = uuid.UUID(r.json()["job_id"])
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    with receiver as erp:
        rows, calls = await run_document_driver(
            pool, settings, 1, store=store, answer=lambda _: answer_for(inv.candidate, inv.ocr_text)
        )
        assert rows[job]["state"] == "SUCCEEDED" and calls == 1
        dispatcher = dispatcher_for(pool)
        try:
            assert (await dispatcher.run_once()).count("delivered") == 1
        finally:
            await dispatcher.close()
        assert await postings(pool, erp.ledger) == {job: 1}

    # The scan finds every string where the pipeline put it: it can see a copy.
    before = await _scan(pool, tmp_path, inv)
    content, master = _needles(inv)
    assert set(before) == {*content, *master}, before
    places = {p for ps in before.values() for p in ps}
    for expected in (
        "document_texts.content",
        "extraction_results.result",
        "deliveries.body",
    ):
        assert expected in places, (expected, before)
    assert any(p.startswith("store:") for p in places), before
    # Every column holding a sealed value is one the scan opens.
    assert await sealed_places(pool, skip=frozenset({"suppliers"})) <= OPENED_PLACES
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.sha256, d.uri FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            job,
        )
    sha256, uri = doc["sha256"], doc["uri"]
    assert uri == f"fenceline-store://{sha256}"
    assert FolderStore(tmp_path / "documents").path_for(sha256).exists()

    async with asgi_client(app) as client:
        assert (
            await client.delete(f"{JOBS}/{job}/content", headers=other.headers)
        ).status_code == 404
        reviewer = await add_key(pool, tk, ("review",))
        assert_problem(
            await client.delete(f"{JOBS}/{job}/content", headers=reviewer.headers), 403, "scope"
        )
        assert await _scan(pool, tmp_path, inv) == before  # refused: nothing erased
        r = await client.delete(f"{JOBS}/{job}/content", headers=tk.headers)
        assert r.status_code == 200, r.text
        first = r.json()
        again = await client.delete(f"{JOBS}/{job}/content", headers=tk.headers)
        assert again.status_code == 200

    assert await _scan(pool, tmp_path, inv) == {}
    assert await sealed_places(pool, skip=frozenset({"suppliers"})) == set()
    assert not FolderStore(tmp_path / "documents").path_for(sha256).exists()
    assert first["repeated"] is False and first["cancelled_first"] is False
    assert (first["job_state"], first["document_sha256"]) == ("SUCCEEDED", sha256)
    assert first["document_erased"] is True and first["object_outcome"] == "removed"
    assert len(first["result_sha256"]) == 64
    [delivery_id] = first["deliveries_sent"]
    assert first["deliveries_abandoned"] == []
    assert first["rows"].items() >= {
        ("extraction_results", 1),
        ("documents", 1),
        ("document_texts", 1),
        ("deliveries", 1),
        ("invoice_identities", 1),
    }
    assert {**again.json(), "repeated": False} == first and again.json()["repeated"] is True

    # The audit skeleton: states, fences, digests, the delivery, the tombstone.
    assert await _count(pool, "SELECT count(*) FROM job_erasures WHERE job_id = $1", job) == 1
    assert (
        await _count(
            pool,
            "SELECT count(*) FROM job_events WHERE job_id = $1 AND detail = 'content_erased'",
            job,
        )
        == 1
    )
    explained = await store.explain(job)
    assert explained["job"]["state"] == "SUCCEEDED"
    assert [e["to_state"] for e in explained["events"]][:3] == ["READY", "RUNNING", "SUCCEEDED"]
    assert explained["document"]["sha256"] == sha256 and explained["document"]["erased_at"]
    assert explained["result"]["decision"] == "SUCCEEDED"
    [delivery] = explained["deliveries"]
    assert (delivery["id"], delivery["state"]) == (uuid.UUID(delivery_id), "delivered")
    [erasure] = explained["erasures"]
    assert erasure["requested_by"] == f"key:{tk.key_id}"
    text = render_explain(explained)
    assert f"sha256 {sha256}; content erased" in text
    assert "content erased by key:" in text and "stored object fenceline-store://" in text
    assert "deliveries already sent (the receiver's copy is not recalled)" in text
    for needle in _needles(inv)[0]:
        assert needle not in text
    # The receiver's copy is the receiver's: reported, never recalled.
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM erp_postings WHERE job_id = $1", job) == 1


async def test_a_running_job_is_cancelled_first_and_its_late_result_is_stale(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    store = JobStore(pool, Settings(lease_seconds=300))
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("driver-1"))[0]
    files = FolderStore(tmp_path)

    done = await erase_job(pool, tenant.id, job.job_id, EraseRequest("ops@example"), files)

    assert done.cancelled_first and done.job_state.value == "CANCELLED"
    with pytest.raises(LeaseLost):
        await store.succeed(lease, result={"invoice_number": "LATE-1"})
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT state, fence FROM extraction_jobs WHERE id = $1", job.job_id
        )
        assert (row["state"], row["fence"]) == ("CANCELLED", lease.fence + 1)
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM extraction_results WHERE job_id = $1", job.job_id
            )
            == 0
        )
        assert (
            await conn.fetchval(
                "SELECT requested_by FROM job_cancellations WHERE job_id = $1", job.job_id
            )
            == "ops@example"
        )
        doc = await conn.fetchrow(
            "SELECT d.content, d.erased_at FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            job.job_id,
        )
        assert doc["content"] is None and doc["erased_at"] is not None
    text = render_explain(await store.explain(job.job_id))
    assert "(cancelled first)" in text and "-> CANCELLED" in text


async def test_a_document_another_job_needs_is_kept_until_that_job_is_erased(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """Two jobs of one tenant share a documents row; two tenants share the embedded
    store's file. Erasing one keeps what the other needs; erasing the last removes it."""
    pdf = text_pdf(_invoice(11).ocr_text)
    settings = settings_for(dsn, state_dir=tmp_path)
    a, b = await tenant_with_key(pool), await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        jobs = []
        for tk, key in ((a, "a-1"), (a, "a-2"), (b, "b-1")):
            r = await client.post(
                JOBS,
                files={"document": ("x.pdf", pdf)},
                headers={**tk.headers, "Idempotency-Key": key},
            )
            assert r.status_code == 202, r.text
            jobs.append(uuid.UUID(r.json()["job_id"]))
    a1, a2, b1 = jobs
    files = FolderStore(tmp_path / "documents")
    [path] = [p for p in files.root.rglob("*") if p.is_file()]
    by = EraseRequest("ops@example")

    first = await erase_job(pool, a.tenant.id, a1, by, files)
    assert (first.document_erased, first.object_outcome) == (False, None)
    second = await erase_job(pool, a.tenant.id, a2, by, files)
    assert (second.document_erased, second.object_outcome) == (True, "shared")
    assert path.exists()  # tenant b still has it
    last = await erase_job(pool, b.tenant.id, b1, by, files)
    assert (last.document_erased, last.object_outcome) == (True, "removed")
    assert not path.exists()
    # The tenant sends the same bytes again: the erased row comes back with them.
    async with asgi_client(create_app(settings, pool=pool)) as client:
        r = await client.post(
            JOBS,
            files={"document": ("x.pdf", pdf)},
            headers={**a.headers, "Idempotency-Key": "a-3"},
        )
        assert r.status_code == 202, r.text
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.uri, d.erased_at FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            uuid.UUID(r.json()["job_id"]),
        )
    assert doc["erased_at"] is None and doc["uri"] is not None and path.exists()


def fenceline(dsn: str, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", "erase", *args],
        env={**os.environ, "FENCELINE_DATABASE_URL": dsn, "FENCELINE_STATE_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_operator_erases_a_whole_tenant_through_the_cli(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    store = JobStore(pool)
    tenant, bystander = await new_tenant(pool), await new_tenant(pool)
    texts = [f"Invoice PLANTED-{uuid.uuid4().hex} total 10.00 EUR" for _ in range(3)]
    mine = [
        (await store.accept(request(tenant, key=f"k{i}", text=t))).job_id
        for i, t in enumerate(texts)
    ]
    lease = (await store.claim("w"))[0]
    await store.succeed(lease, result={"invoice_number": texts[0]})
    kept = (await store.accept(request(bystander, key="k", text="Invoice KEPT-1"))).job_id

    done = fenceline(dsn, tmp_path, "--tenant", tenant.name, "--batch", "2", "--by", "dpo@x")
    assert done.returncode == 0, done.stderr
    # Progress on stderr, a line a batch: the count first, then 2 of 3, then 3 of 3.
    assert [line.strip() for line in done.stderr.splitlines() if "eras" in line] == [
        f"erasing 3 jobs of tenant {tenant.id}",
        "2/3 jobs erased",
        "3/3 jobs erased",
    ]
    erased = json.loads(done.stdout)["erased"]
    assert sorted(e["job_id"] for e in erased) == sorted(map(str, mine))
    assert all(e["requested_by"] == "dpo@x" for e in erased)
    hits = await _hits(pool, [t.split()[1] for t in texts] + ["KEPT-1"])
    assert hits == {"KEPT-1": ["documents.content"]}
    again = fenceline(dsn, tmp_path, "--tenant", tenant.name)
    assert again.returncode == 0 and json.loads(again.stdout)["erased"] == []
    one = fenceline(dsn, tmp_path, "--job", str(mine[0]))
    assert one.returncode == 0 and json.loads(one.stdout)["repeated"] is True
    assert (
        await _count(pool, "SELECT count(*) FROM job_erasures WHERE tenant_id = $1", tenant.id) == 3
    )
    async with pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", kept) == "READY"
        )


async def test_an_operator_key_erases_its_own_tenant_over_http_a_bounded_batch_a_call(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """``POST /v1/tenant-erasures``: operator scope only, the tenant named again, at
    most ``max_jobs`` a call with what is left; another tenant's jobs untouched."""
    settings = settings_for(dsn, state_dir=tmp_path)
    jobs_key = await tenant_with_key(pool)
    operator = await add_key(pool, jobs_key, ("operator",))
    bystander = await tenant_with_key(pool)
    texts = [f"Invoice PLANTED-{uuid.uuid4().hex} total 10.00 EUR" for _ in range(3)]
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for i, text in enumerate(texts):
            r = await client.post(
                JOBS,
                json={"document": {"text": text}},
                headers={**jobs_key.headers, "Idempotency-Key": f"k{i}"},
            )
            assert r.status_code == 202, r.text
        r = await client.post(
            JOBS,
            json={"document": {"text": "Invoice KEPT-2"}},
            headers={**bystander.headers, "Idempotency-Key": "b"},
        )
        assert r.status_code == 202, r.text
        kept = uuid.UUID(r.json()["job_id"])
        tenant = str(jobs_key.tenant.id)

        r = await client.post(
            "/v1/tenant-erasures", json={"confirm_tenant": tenant}, headers=jobs_key.headers
        )
        assert_problem(r, 403, "scope")
        r = await client.post(
            "/v1/tenant-erasures",
            json={"confirm_tenant": str(bystander.tenant.id)},
            headers=operator.headers,
        )
        assert_problem(r, 403, "tenant_not_confirmed")
        assert await _count(pool, "SELECT count(*) FROM job_erasures") == 0

        first = await client.post(
            "/v1/tenant-erasures",
            json={"confirm_tenant": tenant, "max_jobs": 2, "reason": "contract ended"},
            headers=operator.headers,
        )
        assert first.status_code == 200, first.text
        assert (len(first.json()["erased"]), first.json()["remaining"]) == (2, 1)
        assert first.json()["complete"] is False
        assert len(first.json()["cancelled_first"]) == 2  # READY jobs are fenced off first
        last = await client.post(
            "/v1/tenant-erasures", json={"confirm_tenant": tenant}, headers=operator.headers
        )
        assert (len(last.json()["erased"]), last.json()["remaining"]) == (1, 0)
        assert last.json()["complete"] is True
        again = await client.post(
            "/v1/tenant-erasures", json={"confirm_tenant": tenant}, headers=operator.headers
        )
        # the last call shredded the tenant's data keys (none when no KEK made one)
        assert again.json() == {
            **last.json(),
            "erased": [],
            "cancelled_first": [],
            "keys_shredded": [],
        }
    hits = await _hits(pool, [t.split()[1] for t in texts] + ["KEPT-2"])
    assert hits == {"KEPT-2": ["documents.content"]}
    async with pool.acquire() as conn:
        reasons = await conn.fetch(
            "SELECT requested_by, reason FROM job_erasures WHERE tenant_id = $1",
            jobs_key.tenant.id,
        )
        assert await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", kept) == (
            "READY"
        )
    assert len(reasons) == 3
    assert {r["requested_by"] for r in reasons} == {f"key:{operator.key_id}"}


async def test_a_reviewed_jobs_corrections_lose_their_values_and_keep_their_fields(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """A row misread, corrected in the console and approved: the correction's before
    and after values and the review's values go; which field changed stays."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, misread=misread_line_amount)
        truth = job.invoice.truth
        right = str(truth.line_items[0].line_amount)
        wrong = str(Decimal(right) + 10)
        r = await approve_line_amount(c, tk, job, right)
        assert r.status_code == 303, r.text
        assert truth.invoice_number is not None
        needles = [wrong, right, truth.invoice_number.value, truth.line_items[0].description]
        before = await content_hits(pool, _keys(), needles)
        assert "review_corrections.changes" in before[wrong], before
        assert "extraction_results.result" in before[right], before

        erased = await c.delete(f"{JOBS}/{job.job_id}/content", headers=tk.headers)
        assert erased.status_code == 200, erased.text

    assert await _hits(pool, needles) == {}
    async with pool.acquire() as conn:
        changes = await conn.fetchval(
            "SELECT changes FROM review_corrections WHERE job_id = $1", job.job_id
        )
    assert changes == [{"field": "line_items[0].line_amount"}]
    text = render_explain(await JobStore(pool).explain(job.job_id))
    assert "line_items[0].line_amount: (values removed)" in text
    assert erased.json()["rows"]["review_corrections"] == 1
