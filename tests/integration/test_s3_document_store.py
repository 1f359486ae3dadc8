"""The S3 document store against a real S3-protocol server process (moto) on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.documents import DocumentRef, S3Store, StoredObject, open_document_store, sha256_hex
from pipeline.errors import (
    DocumentChanged,
    DocumentMissing,
    DocumentStoreUnavailable,
    RetryableError,
)
from pipeline.settings import Settings
from tests.support.s3_server import CREDENTIALS, free_port, moto_server, s3_client

pytestmark = pytest.mark.integration

TENANT = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)
PDF = b"%PDF-1.7\n" + b"invoice 2026-0042 " * 64
REPLACEMENT = b"%PDF-1.7\n" + b"invoice 2026-0043 " * 64


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def raw(endpoint: str) -> Any:
    return s3_client(endpoint)


def _bucket(raw: Any, *, versioned: bool) -> str:
    name = f"fl-{uuid.uuid4().hex[:12]}"
    raw.create_bucket(Bucket=name)
    if versioned:
        raw.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def _store(endpoint: str, bucket: str) -> S3Store:
    settings = Settings(
        document_store=f"s3://{bucket}/docs",
        document_store_endpoint_url=endpoint,
        document_store_region="us-east-1",
    )
    store = open_document_store(settings)
    assert isinstance(store, S3Store)
    return store


def _key(stored: StoredObject) -> str:
    return stored.uri.split("/", 3)[3]


async def test_round_trip_per_tenant_with_the_digest_as_metadata(endpoint: str, raw: Any) -> None:
    bucket = _bucket(raw, versioned=False)
    store = _store(endpoint, bucket)
    stored = await store.put(TENANT, PDF, "application/pdf")
    digest = sha256_hex(PDF)
    assert stored.uri == f"s3://{bucket}/docs/{TENANT}/{digest}"
    assert (stored.sha256, stored.size) == (digest, len(PDF))
    assert stored.version.startswith('"')  # no versioning: the quoted ETag
    assert await store.get(stored.ref) == PDF
    assert await store.head(DocumentRef(stored.uri)) == stored
    meta = raw.head_object(Bucket=bucket, Key=_key(stored))
    assert meta["Metadata"] == {"sha256": digest}
    assert meta["ContentType"] == "application/pdf"
    # idempotent: the same bytes again, the same answer; another tenant, another key
    assert await store.put(TENANT, PDF, "application/pdf") == stored
    other = await store.put(OTHER, PDF, "application/pdf")
    assert other.uri == f"s3://{bucket}/docs/{OTHER}/{digest}"


async def test_unversioned_overwrite_is_reported_changed(endpoint: str, raw: Any) -> None:
    bucket = _bucket(raw, versioned=False)
    store = _store(endpoint, bucket)
    stored = await store.put(TENANT, PDF, "application/pdf")
    # someone replaces the object behind the key, even claiming the old digest
    raw.put_object(
        Bucket=bucket, Key=_key(stored), Body=REPLACEMENT, Metadata={"sha256": stored.sha256}
    )
    with pytest.raises(DocumentChanged) as by_etag:
        await store.get(stored.ref)
    assert by_etag.value.actual is None  # refused by If-Match before any byte was read
    with pytest.raises(DocumentChanged) as by_digest:
        await store.get(DocumentRef(stored.uri, sha256=stored.sha256))
    assert by_digest.value.actual == sha256_hex(REPLACEMENT)
    assert by_digest.value.error_class == "document_changed"


async def test_versioned_overwrite_keeps_the_old_version_readable(endpoint: str, raw: Any) -> None:
    bucket = _bucket(raw, versioned=True)
    store = _store(endpoint, bucket)
    stored = await store.put(TENANT, PDF, "application/pdf")
    assert not stored.version.startswith('"')  # a version id
    assert await store.put(TENANT, PDF, "application/pdf") == stored  # no second version
    key = _key(stored)
    answer = raw.put_object(Bucket=bucket, Key=key, Body=REPLACEMENT)
    assert answer["VersionId"] != stored.version
    versions = raw.list_object_versions(Bucket=bucket, Prefix=key)["Versions"]
    assert len(versions) == 2
    # the reference names its version: still the accepted bytes
    assert await store.get(stored.ref) == PDF
    assert await store.head(stored.ref) == stored
    # the key's current bytes are not the accepted document
    with pytest.raises(DocumentChanged):
        await store.get(DocumentRef(stored.uri, sha256=stored.sha256))
    # a reference without a digest learns the new version's own (read once: no metadata)
    current = await store.head(DocumentRef(stored.uri))
    assert current.version == answer["VersionId"]
    assert (current.sha256, current.size) == (sha256_hex(REPLACEMENT), len(REPLACEMENT))
    # a version whose bytes were damaged in place is caught by the digest at read
    damaged = raw.put_object(
        Bucket=bucket, Key=key, Body=REPLACEMENT, Metadata={"sha256": "0" * 64}
    )
    with pytest.raises(DocumentChanged):
        await store.get(DocumentRef(stored.uri, damaged["VersionId"]))


async def test_absent_objects_and_versions_are_missing(endpoint: str, raw: Any) -> None:
    bucket = _bucket(raw, versioned=True)
    store = _store(endpoint, bucket)
    absent = DocumentRef(f"s3://{bucket}/docs/{TENANT}/{sha256_hex(b'never')}")
    with pytest.raises(DocumentMissing):
        await store.get(absent)
    with pytest.raises(DocumentMissing):
        await store.head(absent)
    stored = await store.put(TENANT, PDF, "application/pdf")
    with pytest.raises(DocumentMissing):
        await store.get(DocumentRef(stored.uri, "no-such-version", stored.sha256))
    with pytest.raises(DocumentMissing):  # another bucket's object is not this store's
        await store.get(DocumentRef(f"s3://elsewhere/{_key(stored)}"))
    raw.delete_object(Bucket=bucket, Key=_key(stored), VersionId=stored.version)
    with pytest.raises(DocumentMissing) as raised:
        await store.get(stored.ref)
    assert raised.value.error_class == "document_missing"
    no_bucket = _store(endpoint, "fl-no-such-bucket")
    with pytest.raises(DocumentMissing):
        await no_bucket.get(absent)


async def test_an_unreachable_store_is_retryable() -> None:
    store = S3Store("bucket", endpoint_url=f"http://127.0.0.1:{free_port()}", region="us-east-1")
    with pytest.raises(DocumentStoreUnavailable) as raised:
        await store.put(TENANT, PDF, "application/pdf")
    assert isinstance(raised.value, RetryableError)


@pytest.mark.parametrize("versioned", [True, False])
async def test_remove_leaves_no_bytes_behind(endpoint: str, raw: Any, versioned: bool) -> None:
    """An erasure's removal (pipeline/jobs/erasure.py): in a versioned bucket the
    version itself goes, not just behind a delete marker; removing twice is no error."""
    bucket = _bucket(raw, versioned=versioned)
    store = _store(endpoint, bucket)
    stored = await store.put(TENANT, b"erase me %d" % versioned, "text/plain")

    await store.remove(stored.uri, stored.version)
    await store.remove(stored.uri, stored.version)

    with pytest.raises(DocumentMissing):
        await store.get(stored.ref)
    listed = raw.list_object_versions(Bucket=bucket, Prefix=_key(stored))
    assert listed.get("Versions", []) == []
