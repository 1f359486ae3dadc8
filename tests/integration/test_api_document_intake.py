"""POST /v1/extraction-jobs with files and references (issue 43), against real PostgreSQL.

Each test asserts the status, the problem's reason and the rows written (or that none
were), and where the bytes went: the embedded folder store under a temporary state
folder, or a bucket of a real S3-protocol server process (moto) on loopback.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pypdf import PdfReader, PdfWriter

from pipeline.api import create_app
from pipeline.documents import DocumentRef, FolderStore
from pipeline.settings import Settings
from tests.support.api import (
    WRITTEN_TABLES,
    TenantKey,
    asgi_client,
    count_rows,
    settings_for,
    tenant_with_key,
)
from tests.support.outbound import Listener, connects_to, outbound
from tests.support.pdfs import text_pdf, tiny_png
from tests.support.s3_server import CREDENTIALS, moto_server, s3_client

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"
INVOICE_TEXT = "Acme GmbH\nInvoice 2026-0042\nTotal 1,234.56 EUR\fPage two\nIBAN DE89"
PDF = text_pdf(INVOICE_TEXT)


@pytest.fixture
def dsn(module_dsn: str) -> str:
    """One database for this module (tests are sequential; counts are deltas)."""
    return module_dsn


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _settings(dsn: str, state: Path, **overrides: Any) -> Settings:
    return settings_for(dsn, state_dir=state, **overrides)


def _stored_files(state: Path) -> list[Path]:
    root = state / "documents"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def _document_of(pool: asyncpg.Pool, job_id: str) -> asyncpg.Record:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT d.* FROM documents d JOIN extraction_jobs j ON j.document_id = d.id"
            " WHERE j.id = $1",
            uuid.UUID(job_id),
        )
    assert row is not None
    return row


async def _post_file(
    client: httpx.AsyncClient,
    tk: TenantKey,
    data: bytes,
    *,
    name: str = "invoice.pdf",
    content_type: str = "application/pdf",
    key: str | None = None,
) -> httpx.Response:
    headers = dict(tk.headers)
    if key is not None:
        headers["Idempotency-Key"] = key
    return await client.post(JOBS, files={"document": (name, data, content_type)}, headers=headers)


async def test_a_pdf_upload_is_stored_and_referenced_not_kept_in_the_row(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(_settings(dsn, state), pool=pool)
    async with asgi_client(app) as client:
        r = await _post_file(client, tk, PDF, key="pdf-1")
    assert r.status_code == 202, r.text
    digest = hashlib.sha256(PDF).hexdigest()
    doc = await _document_of(pool, r.json()["job_id"])
    assert doc["content"] is None  # bytes never enter PostgreSQL
    assert doc["uri"] == f"fenceline-store://{digest}" and doc["version"] == digest
    assert doc["sha256"] == digest and doc["object_version"] == f"sha256:{digest}"
    assert doc["content_type"] == "application/pdf" and doc["byte_size"] == len(PDF)
    assert doc["page_count"] == 2 and doc["filename"] == "invoice.pdf"
    assert FolderStore(state / "documents").path_for(digest).read_bytes() == PDF
    async with pool.acquire() as conn:
        events = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE job_id = $1", uuid.UUID(r.json()["job_id"])
        )
    assert events == 1


async def test_the_media_type_comes_from_the_bytes_not_the_name_or_header(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(_settings(dsn, state), pool=pool)
    async with asgi_client(app) as client:
        pdf_as_text = await _post_file(client, tk, PDF, name="notes.txt", content_type="text/plain")
        png_as_pdf = await _post_file(client, tk, tiny_png(), name="scan.pdf")
        text_as_pdf = await _post_file(client, tk, INVOICE_TEXT.encode(), name="invoice.pdf")
    for r in (pdf_as_text, png_as_pdf, text_as_pdf):
        assert r.status_code == 202, r.text
    pdf_doc = await _document_of(pool, pdf_as_text.json()["job_id"])
    png_doc = await _document_of(pool, png_as_pdf.json()["job_id"])
    text_doc = await _document_of(pool, text_as_pdf.json()["job_id"])
    assert (pdf_doc["content_type"], pdf_doc["page_count"]) == ("application/pdf", 2)
    assert (png_doc["content_type"], png_doc["page_count"]) == ("image/png", None)
    assert png_doc["uri"].startswith("fenceline-store://") and png_doc["content"] is None
    # UTF-8 text stays a pasted text, in the row, whatever it is called.
    assert text_doc["content"] == INVOICE_TEXT and text_doc["uri"] is None
    assert text_doc["content_type"] == "text/plain"  # not the part's application/pdf


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        (b"PK\x03\x04" + bytes(range(256)) * 4, 415, "unsupported_media_type"),  # a ZIP
        (b"\x00\x01\x02\xfe\xff" * 50, 415, "unsupported_media_type"),
        (b"%PDF-1.7\n" + b"\x00" * 64, 422, "unreadable_document"),
        (text_pdf("x") + b"%" * 3000, 413, "document_over_limit"),
    ],
    ids=["zip", "binary", "broken-pdf", "over-size"],
)
async def test_refused_uploads_write_and_store_nothing(
    pool: asyncpg.Pool, dsn: str, state: Path, data: bytes, status: int, reason: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(_settings(dsn, state, max_document_file_bytes=3000), pool=pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        r = await _post_file(client, tk, data)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["reason"] == reason
    if reason == "document_over_limit":
        assert (r.json()["limit"], r.json()["allowed"]) == ("document_file_bytes", 3000)
    assert await count_rows(pool, *WRITTEN_TABLES) == before
    assert _stored_files(state) == []


async def test_an_encrypted_pdf_is_refused_by_name(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(PDF)))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    tk = await tenant_with_key(pool)
    app = create_app(_settings(dsn, state), pool=pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        r = await _post_file(client, tk, out.getvalue())
    assert (r.status_code, r.json()["reason"]) == (422, "encrypted_document")
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_the_same_file_again_is_a_replay_and_another_file_a_conflict(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(_settings(dsn, state), pool=pool)
    async with asgi_client(app) as client:
        first = await _post_file(client, tk, PDF, key="same-file")
        again = await _post_file(client, tk, PDF, name="renamed.pdf", key="same-file")
        other = await _post_file(client, tk, text_pdf("another invoice"), key="same-file")
        new_key = await _post_file(client, tk, PDF, key="same-file-2")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json() == first.json()  # the file name is not identity: the digest is
    assert (other.status_code, other.json()["reason"]) == (409, "idempotency_conflict")
    assert new_key.status_code == 202
    first_doc = await _document_of(pool, first.json()["job_id"])
    assert (await _document_of(pool, new_key.json()["job_id"]))["id"] == first_doc["id"]
    assert len(_stored_files(state)) == 2  # the conflicting file was stored, harmlessly


async def test_a_reference_to_the_embedded_store_is_checked_and_pinned(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    tk, other = await tenant_with_key(pool), await tenant_with_key(pool)
    app = create_app(_settings(dsn, state), pool=pool)
    async with asgi_client(app) as client:
        uploaded = await _post_file(client, tk, PDF)
    assert uploaded.status_code == 202, uploaded.text
    # Stored behind the intake's back (the bytes are there) but no tenant's document.
    orphan = await FolderStore(state / "documents").put(tk.tenant.id, b"%PDF-1.4\n", "x")
    stored = await FolderStore(state / "documents").head(
        DocumentRef(f"fenceline-store://{hashlib.sha256(PDF).hexdigest()}")
    )
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        ok = await client.post(
            JOBS,
            json={"document": {"uri": stored.uri, "sha256": stored.sha256}},
            headers={**tk.headers, "Idempotency-Key": "ref-1"},
        )
        wrong_digest = await client.post(
            JOBS,
            json={"document": {"uri": stored.uri, "sha256": "0" * 64}},
            headers=tk.headers,
        )
        unknown = await client.post(
            JOBS,
            json={"document": {"uri": f"fenceline-store://{'a' * 64}"}},
            headers=tk.headers,
        )
        other_store = await client.post(
            JOBS, json={"document": {"uri": "s3://some-bucket/invoice.pdf"}}, headers=tk.headers
        )
        # Another tenant's upload, and bytes no document of this tenant has, read as
        # missing objects, with the same answer as one that is not there at all.
        others = await client.post(
            JOBS,
            json={"document": {"uri": stored.uri, "sha256": "0" * 64}},
            headers=other.headers,
        )
        not_a_document = await client.post(
            JOBS, json={"document": {"uri": orphan.uri}}, headers=tk.headers
        )
    assert ok.status_code == 202, ok.text
    doc = await _document_of(pool, ok.json()["job_id"])
    assert (doc["uri"], doc["version"], doc["sha256"]) == (
        stored.uri,
        stored.version,
        stored.sha256,
    )
    assert (doc["content_type"], doc["page_count"], doc["content"]) == ("application/pdf", 2, None)
    assert (wrong_digest.status_code, wrong_digest.json()["reason"]) == (422, "document_changed")
    assert (unknown.status_code, unknown.json()["reason"]) == (422, "document_missing")
    assert (other_store.status_code, other_store.json()["reason"]) == (422, "document_missing")
    assert (others.status_code, others.json()["reason"]) == (422, "document_missing")
    assert others.json()["detail"] == f"no object {stored.uri}"
    assert (not_a_document.status_code, not_a_document.json()["reason"]) == (
        422,
        "document_missing",
    )
    after = await count_rows(pool, *WRITTEN_TABLES)
    assert after["extraction_jobs"] - before["extraction_jobs"] == 1


async def test_a_url_reference_is_refused_and_never_fetched(
    pool: asyncpg.Pool, dsn: str, state: Path
) -> None:
    listener = Listener()
    try:
        tk = await tenant_with_key(pool)
        app = create_app(_settings(dsn, state), pool=pool)
        before = await count_rows(pool, *WRITTEN_TABLES)
        with outbound() as events:
            async with asgi_client(app) as client:
                r = await client.post(
                    JOBS,
                    json={"document": {"uri": listener.url, "sha256": "1" * 64}},
                    headers=tk.headers,
                )
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert listener.accepted() == 0 and connects_to(events, listener.port) == []
        assert await count_rows(pool, *WRITTEN_TABLES) == before
    finally:
        listener.close()


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


async def test_uploads_and_references_through_the_s3_api(
    pool: asyncpg.Pool, dsn: str, state: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    raw = s3_client(s3_endpoint)
    bucket = f"fl-{uuid.uuid4().hex[:12]}"
    raw.create_bucket(Bucket=bucket)
    raw.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    settings = _settings(
        dsn,
        state,
        document_store=f"s3://{bucket}/docs",
        document_store_endpoint_url=s3_endpoint,
        document_store_region="us-east-1",
        max_document_file_bytes=len(PDF) + 1000,
    )
    # A client's own object, written before the request, then replaced by a newer version.
    first = raw.put_object(Bucket=bucket, Key="inbox/a.pdf", Body=PDF)
    raw.put_object(Bucket=bucket, Key="inbox/a.pdf", Body=text_pdf("replaced"))
    raw.put_object(Bucket=bucket, Key="inbox/big.pdf", Body=PDF + b"%" * 4000)
    tk, other = await tenant_with_key(pool), await tenant_with_key(pool)
    app = create_app(settings, pool=pool)

    def upload_uri(owner: TenantKey) -> str:
        return f"s3://{bucket}/docs/{owner.tenant.id}/{hashlib.sha256(PDF).hexdigest()}"

    async with asgi_client(app) as client:
        upload = await _post_file(client, tk, PDF, key="s3-upload")
        pinned = await client.post(
            JOBS,
            json={
                "document": {
                    "uri": f"s3://{bucket}/inbox/a.pdf",
                    "version": first["VersionId"],
                    "sha256": hashlib.sha256(PDF).hexdigest(),
                }
            },
            headers={**tk.headers, "Idempotency-Key": "s3-ref"},
        )
        missing = await client.post(
            JOBS, json={"document": {"uri": f"s3://{bucket}/inbox/none.pdf"}}, headers=tk.headers
        )
        other_bucket = await client.post(
            JOBS, json={"document": {"uri": "s3://another-bucket/a.pdf"}}, headers=tk.headers
        )
        big = await client.post(
            JOBS, json={"document": {"uri": f"s3://{bucket}/inbox/big.pdf"}}, headers=tk.headers
        )
        others_upload = await client.post(
            JOBS,
            json={"document": {"uri": upload_uri(tk)}},
            headers=other.headers,
        )
    assert upload.status_code == 202, upload.text
    digest = hashlib.sha256(PDF).hexdigest()
    doc = await _document_of(pool, upload.json()["job_id"])
    assert doc["uri"] == f"s3://{bucket}/docs/{tk.tenant.id}/{digest}"
    head = raw.head_object(Bucket=bucket, Key=f"docs/{tk.tenant.id}/{digest}")
    assert doc["version"] == head["VersionId"] and doc["content"] is None
    assert _stored_files(state) == []  # nothing in the folder store
    assert pinned.status_code in (200, 202), pinned.text
    # The same bytes as the upload: the tenant's one documents row for that digest.
    assert (await _document_of(pool, pinned.json()["job_id"]))["sha256"] == digest
    assert (missing.status_code, missing.json()["reason"]) == (422, "document_missing")
    assert (other_bucket.status_code, other_bucket.json()["reason"]) == (422, "document_missing")
    # Over the file limit by its head, before a byte of it is read.
    assert (big.status_code, big.json()["reason"]) == (413, "document_over_limit")
    # Another tenant's upload-area key: missing, before the store is asked.
    assert (others_upload.status_code, others_upload.json()["reason"]) == (
        422,
        "document_missing",
    )


async def test_a_reference_to_another_tenants_new_object_is_its_own_row(
    pool: asyncpg.Pool, dsn: str, state: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A referenced object this tenant never uploaded: a new row with its version."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    raw = s3_client(s3_endpoint)
    bucket = f"fl-{uuid.uuid4().hex[:12]}"
    raw.create_bucket(Bucket=bucket)
    raw.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    data = text_pdf("Invoice 77\nTotal 10.00 EUR")
    put = raw.put_object(Bucket=bucket, Key="in/77.pdf", Body=data)
    settings = _settings(
        dsn,
        state,
        document_store=f"s3://{bucket}",
        document_store_endpoint_url=s3_endpoint,
        document_store_region="us-east-1",
    )
    tk = await tenant_with_key(pool)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        r = await client.post(
            JOBS, json={"document": {"uri": f"s3://{bucket}/in/77.pdf"}}, headers=tk.headers
        )
    assert r.status_code == 202, r.text
    doc = await _document_of(pool, r.json()["job_id"])
    assert (doc["uri"], doc["version"]) == (f"s3://{bucket}/in/77.pdf", put["VersionId"])
    assert doc["sha256"] == hashlib.sha256(data).hexdigest() and doc["page_count"] == 1
