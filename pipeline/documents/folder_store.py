"""The embedded default store: a content-addressed folder on local disk.

An object's path is its SHA-256 (``<root>/sha256/ab/cd/abcd…``), its URI
``fenceline-store://<sha256>`` and its version the same SHA-256: the bytes *are* the
version, so a reference can never come to name other bytes, and storing the same
bytes twice (for one tenant or several) writes them once.

Writes are atomic: a temporary file in the target folder, written, ``fsync``-ed and
renamed over the final name, then the folder ``fsync``-ed, so a crash leaves either
no object or the whole one, never a torn file under a digest's name. Reads hash what
they read, so a file damaged or replaced on disk is reported
(:class:`~pipeline.errors.DocumentChanged`), never handed on.

Shared content means a document is not one tenant's to delete: erasure and retention
remove a file only when no documents row of any tenant still needs it
(pipeline/jobs/object_removal.py). Disk I/O runs in a worker thread
(``asyncio.to_thread``) so the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from pathlib import Path

from pipeline.documents.store import DocumentRef, StoredObject, is_sha256_hex, sha256_hex
from pipeline.errors import DocumentChanged, DocumentMissing, DocumentOverLimit

SCHEME = "fenceline-store://"


class FolderStore:
    """A :class:`~pipeline.documents.store.DocumentStore` in a folder (``root``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def uri_for(self, sha256: str) -> str:
        return SCHEME + sha256

    def path_for(self, sha256: str) -> Path:
        """Where the object with this digest lives (two levels of fan-out)."""
        return self.root / "sha256" / sha256[:2] / sha256[2:4] / sha256

    async def put(
        self,
        tenant: uuid.UUID,  # noqa: ARG002 - content-addressed: shared by tenants
        data: bytes,
        media_type: str,  # noqa: ARG002 - the documents row keeps it
    ) -> StoredObject:
        """Store ``data``; the tenant and media type are the documents row's to keep."""
        return await asyncio.to_thread(self._put, data)

    async def get(self, ref: DocumentRef) -> bytes:
        return await asyncio.to_thread(self._get, ref)

    async def head(self, ref: DocumentRef, *, max_bytes: int | None = None) -> StoredObject:
        stored = await asyncio.to_thread(self._head, ref)
        if max_bytes is not None and stored.size > max_bytes:
            raise DocumentOverLimit("document_file_bytes", allowed=max_bytes, actual=stored.size)
        return stored

    async def remove(self, uri: str, version: str) -> None:
        """Unlink the file (the version is its digest); an absent file is no error."""
        digest = self._digest_of(DocumentRef(uri, version))
        await asyncio.to_thread(self._remove, digest)

    def upload_digest(self, uri: str) -> str | None:
        """Every object here is an upload, shared by the tenants that put the same bytes."""
        digest = uri[len(SCHEME) :]
        return digest if uri.startswith(SCHEME) and is_sha256_hex(digest) else None

    def _digest_of(self, ref: DocumentRef) -> str:
        """The digest ``ref`` addresses, or DocumentMissing for a reference not of this store."""
        if not ref.uri.startswith(SCHEME) or not is_sha256_hex(ref.uri[len(SCHEME) :]):
            raise DocumentMissing(f"not a reference of the embedded store: {ref.uri!r}")
        digest = ref.uri[len(SCHEME) :]
        if ref.version is not None and ref.version != digest:
            raise DocumentMissing(f"{ref.uri} has one version, {digest}, not {ref.version!r}")
        if ref.sha256 is not None and ref.sha256 != digest:
            raise DocumentChanged(ref.uri, expected=ref.sha256, actual=digest)
        return digest

    def _put(self, data: bytes) -> StoredObject:
        digest = sha256_hex(data)
        path = self.path_for(digest)
        stored = StoredObject(self.uri_for(digest), digest, digest, len(data))
        try:
            if sha256_hex(path.read_bytes()) == digest:
                return stored  # already there, whole: idempotent
        except FileNotFoundError:
            pass
        # Absent or damaged: write it (again), atomically.
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o444)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        _fsync_folder(path.parent)
        return stored

    def _get(self, ref: DocumentRef) -> bytes:
        digest = self._digest_of(ref)
        try:
            data = self.path_for(digest).read_bytes()
        except FileNotFoundError:
            raise DocumentMissing(f"no object {ref.uri}") from None
        actual = sha256_hex(data)
        if actual != digest:
            raise DocumentChanged(ref.uri, expected=digest, actual=actual)
        return data

    def _remove(self, digest: str) -> None:
        path = self.path_for(digest)
        path.unlink(missing_ok=True)
        if path.parent.exists():
            _fsync_folder(path.parent)

    def _head(self, ref: DocumentRef) -> StoredObject:
        digest = self._digest_of(ref)
        try:
            size = self.path_for(digest).stat().st_size
        except FileNotFoundError:
            raise DocumentMissing(f"no object {ref.uri}") from None
        return StoredObject(ref.uri, digest, digest, size)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: the directory entry is the folder's data)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
