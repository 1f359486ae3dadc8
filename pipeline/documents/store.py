"""Where a document's bytes live: the store protocol and the references it hands out.

A document is accepted once and read later, by another process, perhaps after a
restart. What connects the two is a reference that names *one immutable version*
of the bytes and their SHA-256, never a mutable key: a store whose object behind a
key was replaced answers the old reference with :class:`~pipeline.errors.DocumentChanged`
(or the old version's bytes, where it keeps versions), never with the new bytes.

Invariants every :class:`DocumentStore` keeps:

* ``put`` returns only after the bytes are durable, and putting the same bytes again
  for the same tenant returns an equal :class:`StoredObject` (idempotent);
* ``get`` returns bytes whose SHA-256 is the reference's, or raises
  :class:`~pipeline.errors.DocumentChanged` / :class:`~pipeline.errors.DocumentMissing`;
* no method reads the whole object into memory twice, and none blocks the event loop.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """A reference to stored bytes, as a job row or a client names them.

    Attributes:
        uri: where the object lives (``fenceline-store://<sha256>``, ``s3://bucket/key``).
        version: the version the reference names; None: the store's current one
            (resolve it once with :meth:`DocumentStore.head`, then keep the answer).
        sha256: the digest (64 lowercase hex) the bytes must have; None: unknown yet.
    """

    uri: str
    version: str | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One stored, immutable version of a document: what a documents row keeps.

    Attributes:
        uri: where the object lives.
        version: the version this names (the folder store: the SHA-256; S3: the
            version id, or the quoted ETag where the bucket keeps no versions).
        sha256: the bytes' SHA-256, 64 lowercase hex.
        size: the bytes' length.
    """

    uri: str
    version: str
    sha256: str
    size: int

    @property
    def ref(self) -> DocumentRef:
        """This object as a reference that ``get`` checks against all three fields."""
        return DocumentRef(self.uri, self.version, self.sha256)


@runtime_checkable
class DocumentStore(Protocol):
    """Bytes in, a :class:`StoredObject` out; the reference back, the same bytes out."""

    async def put(self, tenant: uuid.UUID, data: bytes, media_type: str) -> StoredObject:
        """Store ``data`` durably for ``tenant``; the same bytes again give an equal answer."""
        ...

    async def get(self, ref: DocumentRef) -> bytes:
        """The bytes ``ref`` names, checked against its SHA-256 and the one recorded at put.

        Raises:
            DocumentMissing: no object (or no such version) behind ``ref``.
            DocumentChanged: the bytes found do not have the expected SHA-256.
            DocumentStoreUnavailable: the store did not answer.
        """
        ...

    async def head(self, ref: DocumentRef, *, max_bytes: int | None = None) -> StoredObject:
        """What the store holds for ``ref`` (its version resolved), without returning the bytes.

        ``max_bytes``: an object larger than this is refused before any of it is read
        (a store that must read an object to learn its digest reads none then).

        Raises:
            DocumentMissing: no object (or no such version) behind ``ref``.
            DocumentChanged: the store records another SHA-256 than ``ref`` names.
            DocumentOverLimit: the object is over ``max_bytes`` (``document_file_bytes``).
            DocumentStoreUnavailable: the store did not answer.
        """
        ...

    async def remove(self, uri: str, version: str) -> None:
        """Remove the object ``uri`` at ``version`` (erasure or retention,
        pipeline/jobs/object_removal.py); one already absent is no error.

        Raises:
            DocumentMissing: ``uri`` is not an object of this store.
            DocumentStoreUnavailable: the store did not answer.
        """
        ...

    def upload_digest(self, uri: str) -> str | None:
        """The SHA-256 in ``uri`` when it names an object :meth:`put` writes (the
        store's own upload area, shared by tenants or keyed by one), else None.

        Such a reference must name a document its tenant already has: the intake
        checks that before it asks the store anything, so no tenant learns what
        another stored."""
        ...


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits, the form every reference uses."""
    return hashlib.sha256(data).hexdigest()


def is_sha256_hex(value: str) -> bool:
    """Whether ``value`` is a digest in the references' form (64 lowercase hex digits)."""
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
