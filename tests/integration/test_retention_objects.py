"""Retention removes an uploaded file's stored object (issue 46, item 1; migration
045): once no documents row of any tenant still needs it, after the batch's commit,
recorded per document, retried when the store did not answer, never under a legal
hold; an upload of the same bytes racing the removal waits for it and puts the
bytes again."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from pipeline.api.document_intake import DocumentIntake
from pipeline.api.submission import FileUpload
from pipeline.clock import ManualClock
from pipeline.documents import DocumentRef, FolderStore, MediaType, S3Store, StoredObject
from pipeline.errors import DocumentMissing, DocumentStoreUnavailable
from pipeline.jobs import (
    AcceptRequest,
    DocumentIn,
    EraseRequest,
    JobStore,
    ObjectReference,
    RetentionConfig,
    erase_job,
    render_explain,
    retention_due,
    run_retention,
    set_legal_hold,
)
from pipeline.jobs.object_removal import remove_unneeded_object
from pipeline.settings import Settings
from pipeline.tenants import Tenant
from tests.support.jobs import new_tenant
from tests.support.pdfs import text_pdf
from tests.support.s3_server import CREDENTIALS, moto_server, s3_client

pytestmark = pytest.mark.integration


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def later(days: float) -> ManualClock:
    return ManualClock(datetime.now(UTC) + timedelta(days=days))


def pdf() -> bytes:
    """A PDF no other test has stored (its own bytes, its own object)."""
    return text_pdf(f"INVOICE {uuid.uuid4().hex}")


def upload_of(stored: StoredObject) -> DocumentIn:
    return DocumentIn(
        content_type=MediaType.PDF.value,
        filename="x.pdf",
        reference=ObjectReference(
            uri=stored.uri,
            version=stored.version,
            sha256=stored.sha256,
            size=stored.size,
            page_count=1,
        ),
    )


async def upload_job(
    jobs: JobStore, files: Any, tenant: Tenant, data: bytes, *, settle: bool = True
) -> uuid.UUID:
    """Put ``data`` in ``files`` as the intake does, accept a job naming it, settle it."""
    stored = await files.put(tenant.id, data, MediaType.PDF.value)
    accepted = await jobs.accept(
        AcceptRequest(
            tenant_id=tenant.id, idempotency_key=uuid.uuid4().hex, document=upload_of(stored)
        )
    )
    if settle:
        await settle_job(jobs, accepted.job_id)
    return accepted.job_id


async def settle_job(jobs: JobStore, job: uuid.UUID) -> None:
    [lease] = await jobs.claim(f"w-{job}")
    assert lease.job_id == job
    await jobs.succeed(lease, result={"invoice_number": "PLANTED"}, validation={})


async def object_state(pool: asyncpg.Pool, job: uuid.UUID) -> dict[str, Any]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT d.uri, d.object_pending_at, d.object_removed_at, d.object_outcome"
            " FROM documents d JOIN extraction_jobs j ON j.document_id = d.id WHERE j.id = $1",
            job,
        )
    assert row is not None
    return dict(row.items())


class DownStore:
    """The folder store, except that removal fails as an unreachable store does."""

    def __init__(self, files: FolderStore) -> None:
        self.files = files
        self.removes = 0

    def upload_digest(self, uri: str) -> str | None:
        return self.files.upload_digest(uri)

    async def remove(self, uri: str, version: str) -> None:
        self.removes += 1
        raise DocumentStoreUnavailable("store down")


@pytest.fixture
def jobs(pool: asyncpg.Pool) -> JobStore:
    return JobStore(pool, Settings(duplicate_invoice_check=False))


async def test_an_uploaded_files_object_is_removed_once_recorded_and_explained(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    files = FolderStore(tmp_path)
    tenant = await new_tenant(pool)
    data = pdf()
    job = await upload_job(jobs, files, tenant, data)
    path = files.path_for(_digest(data))
    assert path.exists()

    young = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(29), store=files
    )
    assert young.objects == 0 and path.exists()
    dry = await retention_due(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert dry.objects == 1 and path.exists()

    report = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(31), store=files
    )
    assert (report.content_jobs, report.objects, report.objects_pending) == (1, 1, 0)
    assert report.as_dict()["objects"] == 1
    assert not path.exists()
    state = await object_state(pool, job)
    assert state["object_outcome"] == "removed" and state["object_pending_at"] is None
    assert state["object_removed_at"] is not None

    again = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(31), store=files
    )
    assert (again.content_jobs, again.objects) == (0, 0)
    text = render_explain(await jobs.explain(job))
    assert f"stored object {state['uri']}: removed at" in text


async def test_a_file_another_tenant_still_needs_stays_until_that_one_is_released_too(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    files = FolderStore(tmp_path)
    a, b = await new_tenant(pool), await new_tenant(pool)
    data = pdf()
    job_a = await upload_job(jobs, files, a, data)
    job_b = await upload_job(jobs, files, b, data, settle=False)  # b's job still READY
    path = files.path_for(_digest(data))

    first = await run_retention(pool, RetentionConfig(), clock=later(31), store=files)
    assert first.objects == 0 and first.objects_shared >= 1
    assert path.exists()
    assert (await object_state(pool, job_a))["object_outcome"] == "shared"

    await settle_job(jobs, job_b)
    second = await run_retention(pool, RetentionConfig(), tenant=b.id, clock=later(31), store=files)
    assert second.objects == 1 and not path.exists()
    assert (await object_state(pool, job_b))["object_outcome"] == "removed"


async def test_an_object_released_by_retention_no_longer_keeps_an_erased_one(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    """Erasure asks the same question: a row retention released needs no bytes."""
    files = FolderStore(tmp_path)
    a, b = await new_tenant(pool), await new_tenant(pool)
    data = pdf()
    await upload_job(jobs, files, a, data)
    job_b = await upload_job(jobs, files, b, data, settle=False)
    await run_retention(pool, RetentionConfig(), tenant=a.id, clock=later(31), store=files)
    assert files.path_for(_digest(data)).exists()  # b's READY job needs it
    erased = await erase_job(pool, b.id, job_b, EraseRequest("ops@example"), files)
    assert erased.object_outcome == "removed"
    assert not files.path_for(_digest(data)).exists()


async def test_a_store_that_fails_is_retried_by_the_next_pass(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    files = FolderStore(tmp_path)
    tenant = await new_tenant(pool)
    data = pdf()
    job = await upload_job(jobs, files, tenant, data)
    down = DownStore(files)

    failed = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(31), store=down
    )
    assert (failed.content_jobs, failed.objects, failed.objects_pending) == (1, 0, 1)
    assert down.removes == 1 and files.path_for(_digest(data)).exists()
    assert (await object_state(pool, job))["object_pending_at"] is not None
    dry = await retention_due(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert dry.objects == 1  # the pending one, to be retried

    retried = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(32), store=files
    )
    assert (retried.content_jobs, retried.objects, retried.objects_pending) == (0, 1, 0)
    assert not files.path_for(_digest(data)).exists()
    assert (await object_state(pool, job))["object_outcome"] == "removed"


async def test_a_legal_hold_keeps_the_object(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    files = FolderStore(tmp_path)
    tenant = await new_tenant(pool)
    data = pdf()
    job = await upload_job(jobs, files, tenant, data)
    assert await set_legal_hold(pool, tenant.id, reason="litigation", actor="legal", job=job)

    report = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(400), store=files
    )
    assert (report.content_jobs, report.objects, report.objects_pending) == (0, 0, 0)
    assert files.path_for(_digest(data)).exists()
    assert (await object_state(pool, job))["object_pending_at"] is None


async def test_an_upload_racing_the_removal_waits_for_it_and_puts_the_bytes_again(
    pool: asyncpg.Pool, jobs: JobStore, tmp_path: Path
) -> None:
    """The remover holds the uri's lock over check, removal and record; an accept of the
    same bytes (another tenant) waits on it, then the intake finds the object gone and
    stores it again before answering."""
    files = FolderStore(tmp_path)
    a, b = await new_tenant(pool), await new_tenant(pool)
    data = pdf()
    await upload_job(jobs, files, a, data)
    await run_retention(pool, RetentionConfig(), tenant=a.id, clock=later(31), store=None)
    stored = await files.put(b.id, data, MediaType.PDF.value)  # b's intake put, before accept

    async with pool.acquire() as conn, conn.transaction():
        outcome = await remove_unneeded_object(conn, stored.uri, stored.version, files)
        assert outcome == "removed" and not files.path_for(stored.sha256).exists()
        accept = asyncio.create_task(
            jobs.accept(
                AcceptRequest(tenant_id=b.id, idempotency_key="race", document=upload_of(stored))
            )
        )
        await asyncio.sleep(0.5)
        assert not accept.done()  # the documents insert waits on the uri's lock
    accepted = await asyncio.wait_for(accept, 10)
    assert accepted.created
    intake = DocumentIntake(files, pool, max_file_bytes=10**6, max_pages=10)
    upload = FileUpload(data=data, media_type=MediaType.PDF, filename="x.pdf")
    await intake.ensure_stored(b.id, upload, upload_of(stored))
    assert await files.get(DocumentRef(stored.uri, stored.version, stored.sha256)) == data

    # And now b's row needs it: a's pending removal keeps it.
    report = await run_retention(pool, RetentionConfig(), tenant=a.id, clock=later(31), store=files)
    assert report.objects_shared == 1 and files.path_for(stored.sha256).exists()


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


async def test_the_s3_stores_upload_is_removed(
    pool: asyncpg.Pool,
    jobs: JobStore,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    bucket = f"fl-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=bucket)
    s3 = S3Store(bucket, "docs", endpoint_url=s3_endpoint, region="us-east-1")
    tenant = await new_tenant(pool)
    data = pdf()
    job = await upload_job(jobs, s3, tenant, data)
    uri = (await object_state(pool, job))["uri"]
    assert uri.startswith(f"s3://{bucket}/docs/{tenant.id}/")

    report = await run_retention(
        pool, RetentionConfig(), tenant=tenant.id, clock=later(31), store=s3
    )
    assert report.objects == 1
    with pytest.raises(DocumentMissing):
        await s3.get(DocumentRef(uri))
    assert (await object_state(pool, job))["object_outcome"] == "removed"
