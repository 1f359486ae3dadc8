"""The embedded document store: a content-addressed folder, atomic and checked at read."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from pipeline.documents import (
    DocumentRef,
    DocumentStore,
    FolderStore,
    S3Store,
    open_document_store,
    sha256_hex,
)
from pipeline.errors import DocumentChanged, DocumentMissing, TerminalError
from pipeline.settings import Settings

TENANT = uuid.UUID(int=1)
OTHER = uuid.UUID(int=2)
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 4


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    return FolderStore(tmp_path / "documents")


async def test_put_then_get_round_trips_the_bytes(store: FolderStore) -> None:
    stored = await store.put(TENANT, PDF, "application/pdf")
    digest = sha256_hex(PDF)
    assert stored.uri == f"fenceline-store://{digest}"
    assert (stored.version, stored.sha256, stored.size) == (digest, digest, len(PDF))
    assert await store.get(stored.ref) == PDF
    assert await store.head(DocumentRef(stored.uri)) == stored
    assert store.path_for(digest).read_bytes() == PDF


async def test_putting_the_same_bytes_again_is_idempotent(store: FolderStore) -> None:
    first = await store.put(TENANT, PDF, "application/pdf")
    path = store.path_for(first.sha256)
    written = path.stat().st_mtime_ns
    again = await store.put(TENANT, PDF, "application/pdf")
    other_tenant = await store.put(OTHER, PDF, "application/pdf")
    assert first == again == other_tenant
    assert path.stat().st_mtime_ns == written  # not written a second time
    files = [p for p in (store.root).rglob("*") if p.is_file()]
    assert files == [path]  # and no temporary file left behind


async def test_a_tampered_file_is_reported_changed(store: FolderStore) -> None:
    stored = await store.put(TENANT, PDF, "application/pdf")
    path = store.path_for(stored.sha256)
    os.chmod(path, 0o644)
    path.write_bytes(PDF.replace(b"1.7", b"1.4"))
    with pytest.raises(DocumentChanged) as raised:
        await store.get(stored.ref)
    assert raised.value.expected == stored.sha256
    assert raised.value.actual == sha256_hex(PDF.replace(b"1.7", b"1.4"))
    assert isinstance(raised.value, TerminalError)
    assert raised.value.error_class == "document_changed"
    # putting the bytes again repairs the object under its name
    assert await store.put(TENANT, PDF, "application/pdf") == stored
    assert await store.get(stored.ref) == PDF


async def test_a_missing_object_is_reported_missing(store: FolderStore) -> None:
    absent = DocumentRef(f"fenceline-store://{sha256_hex(b'never stored')}")
    with pytest.raises(DocumentMissing):
        await store.get(absent)
    with pytest.raises(DocumentMissing):
        await store.head(absent)
    stored = await store.put(TENANT, PDF, "application/pdf")
    store.path_for(stored.sha256).unlink()
    with pytest.raises(DocumentMissing) as raised:
        await store.get(stored.ref)
    assert raised.value.error_class == "document_missing"


@pytest.mark.parametrize(
    "ref",
    [
        DocumentRef("s3://bucket/key"),
        DocumentRef("fenceline-store://../../etc/passwd"),
        DocumentRef("fenceline-store://" + "A" * 64),
        DocumentRef(f"fenceline-store://{sha256_hex(PDF)}", version="another"),
    ],
)
async def test_a_reference_this_store_cannot_hold_is_missing(
    store: FolderStore, ref: DocumentRef
) -> None:
    await store.put(TENANT, PDF, "application/pdf")
    with pytest.raises(DocumentMissing):
        await store.get(ref)


async def test_a_reference_with_another_digest_is_changed(store: FolderStore) -> None:
    stored = await store.put(TENANT, PDF, "application/pdf")
    with pytest.raises(DocumentChanged):
        await store.get(DocumentRef(stored.uri, sha256=sha256_hex(b"other")))


def test_the_settings_choose_the_store(tmp_path: Path) -> None:
    folder = open_document_store(Settings(state_dir=tmp_path))
    assert isinstance(folder, FolderStore) and isinstance(folder, DocumentStore)
    assert folder.root == tmp_path / "documents"
    s3 = open_document_store(
        Settings(
            document_store="s3://invoices/fenceline/prod",
            document_store_endpoint_url="http://127.0.0.1:9",
            document_store_region="eu-central-1",
        )
    )
    assert isinstance(s3, S3Store) and isinstance(s3, DocumentStore)
    assert (s3.bucket, s3.prefix) == ("invoices", "fenceline/prod")
    assert s3.key_for(TENANT, "ab" * 32) == f"fenceline/prod/{TENANT}/{'ab' * 32}"
    with pytest.raises(ValueError, match="FENCELINE_DOCUMENT_STORE"):
        open_document_store(Settings(document_store="ftp://somewhere"))
