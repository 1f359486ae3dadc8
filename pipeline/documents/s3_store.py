"""Documents in an object store that speaks the S3 API (AWS S3, MinIO, Ceph, R2).

Client: boto3's synchronous client, each call run in a worker thread
(``asyncio.to_thread``). A boto3 client is thread-safe once made; the calls are few
and short per document (one upload at intake, one read per attempt), so a thread per
call costs nothing that matters, while aiobotocore pins an exact botocore release
(a version conflict with anything else using boto3) and adds a second HTTP stack.
Credentials come only from boto's own chain (environment, shared files, web
identity, instance or pod role); none is ever read from Fenceline's settings.

Keys are ``<prefix>/<tenant>/<sha256>``: one tenant's documents under one prefix
(for lifecycle rules and policies), the same bytes for a tenant stored once. The
SHA-256 travels as object metadata (``x-amz-meta-sha256``) and every read hashes the
bytes again; the upload sends ``Content-MD5`` so the server refuses torn bytes.

A reference's version is the object's version id where the bucket keeps versions,
so a replaced object leaves the old reference readable. Elsewhere it is the object's
ETag, *quoted as S3 sends it* (``"9b2c…"``; version ids never hold a quote), and a
read sends it as ``If-Match``: a replaced object then answers 412, reported as
:class:`~pipeline.errors.DocumentChanged`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from pipeline.documents.store import DocumentRef, StoredObject, is_sha256_hex, sha256_hex
from pipeline.errors import (
    DocumentChanged,
    DocumentMissing,
    DocumentOverLimit,
    DocumentStoreUnavailable,
)

#: S3 error codes that mean "nothing there for you" (403: a missing key without ListBucket).
_MISSING = {"404", "NoSuchKey", "NoSuchVersion", "NoSuchBucket", "403", "AccessDenied"}
_MISSING |= {"InvalidArgument", "InvalidVersionId"}  # a malformed version id names nothing
_PRECONDITION = {"412", "PreconditionFailed"}


class S3Store:
    """A :class:`~pipeline.documents.store.DocumentStore` on one bucket and key prefix."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        config = Config(
            retries={"mode": "standard", "max_attempts": 3},
            connect_timeout=5,
            read_timeout=30,
        )
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url, region_name=region, config=config
        )

    @classmethod
    def from_url(
        cls, url: str, *, endpoint_url: str | None = None, region: str | None = None
    ) -> S3Store:
        """The store an ``s3://bucket/prefix`` URL names."""
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise ValueError(f"not an s3://bucket/prefix URL: {url!r}")
        return cls(parts.netloc, parts.path, endpoint_url=endpoint_url, region=region)

    def key_for(self, tenant: uuid.UUID, sha256: str) -> str:
        return "/".join(p for p in (self.prefix, str(tenant), sha256) if p)

    async def put(self, tenant: uuid.UUID, data: bytes, media_type: str) -> StoredObject:
        return await asyncio.to_thread(self._put, tenant, data, media_type)

    async def get(self, ref: DocumentRef) -> bytes:
        return await asyncio.to_thread(self._get, ref)

    async def head(self, ref: DocumentRef, *, max_bytes: int | None = None) -> StoredObject:
        return await asyncio.to_thread(self._head, ref, max_bytes)

    async def remove(self, uri: str, version: str) -> None:
        """Delete the object's version (a version id), or the key where the bucket keeps
        no versions (an ETag): a versioned bucket would otherwise keep the bytes under
        a delete marker. S3 answers an absent key or version with success."""
        await asyncio.to_thread(self._remove, uri, version)

    def upload_digest(self, uri: str) -> str | None:
        """The digest of an upload-area key (``<prefix>/<tenant uuid>/<sha256>`` in this
        bucket), else None (an object the client wrote elsewhere in the bucket)."""
        parts = urlsplit(uri)
        if parts.scheme != "s3" or parts.netloc != self.bucket:
            return None
        key = parts.path.lstrip("/")
        if self.prefix:
            if not key.startswith(self.prefix + "/"):
                return None
            key = key[len(self.prefix) + 1 :]
        segments = key.split("/")
        if len(segments) != 2 or not is_sha256_hex(segments[1]):
            return None
        try:
            uuid.UUID(segments[0])
        except ValueError:
            return None
        return segments[1]

    def _put(self, tenant: uuid.UUID, data: bytes, media_type: str) -> StoredObject:
        digest = sha256_hex(data)
        key = self.key_for(tenant, digest)
        uri = f"s3://{self.bucket}/{key}"
        try:  # already there with these bytes: the same answer, no new version
            current = self._head(DocumentRef(uri))
            if current.sha256 == digest and current.size == len(data):
                return current
        except DocumentMissing:
            pass
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        answer = self._call(
            "put_object",
            uri,
            Bucket=self.bucket,
            Key=key,
            Body=data,
            ContentType=media_type,
            ContentMD5=md5,
            Metadata={"sha256": digest},
        )
        return StoredObject(uri, _version(answer), digest, len(data))

    def _remove(self, uri: str, version: str) -> None:
        key = self._key_of(uri)
        which = {} if version.startswith('"') else {"VersionId": version}
        self._call("delete_object", uri, Bucket=self.bucket, Key=key, **which)

    def _get(self, ref: DocumentRef) -> bytes:
        answer = self._at(ref, "get_object")
        try:
            data: bytes = answer["Body"].read()
        except BotoCoreError as exc:
            raise DocumentStoreUnavailable(f"reading {ref.uri}: {exc}") from exc
        finally:
            answer["Body"].close()
        actual = sha256_hex(data)
        for expected in (ref.sha256, answer.get("Metadata", {}).get("sha256")):
            if expected is not None and expected != actual:
                raise DocumentChanged(ref.uri, expected=expected, actual=actual)
        return data

    def _head(self, ref: DocumentRef, max_bytes: int | None = None) -> StoredObject:
        answer = self._at(ref, "head_object")
        recorded = answer.get("Metadata", {}).get("sha256")
        if ref.sha256 is not None and recorded is not None and recorded != ref.sha256:
            raise DocumentChanged(ref.uri, expected=ref.sha256, actual=recorded)
        version = _version(answer)
        size = int(answer["ContentLength"])
        if max_bytes is not None and size > max_bytes:
            raise DocumentOverLimit("document_file_bytes", allowed=max_bytes, actual=size)
        digest = recorded or ref.sha256
        if digest is None:  # written by someone else: read it once to learn its digest
            digest = sha256_hex(self._get(DocumentRef(ref.uri, version)))
        return StoredObject(ref.uri, version, digest, size)

    def _at(self, ref: DocumentRef, operation: str) -> dict[str, Any]:
        """``operation`` (get or head) on the object ``ref`` names, pinned to its version."""
        key = self._key_of(ref.uri)
        return self._call(
            operation,
            ref.uri,
            ref.sha256 or ref.version,
            Bucket=self.bucket,
            Key=key,
            **_which(ref),
        )

    def _key_of(self, uri: str) -> str:
        parts = urlsplit(uri)
        key = parts.path.lstrip("/")
        if parts.scheme != "s3" or parts.netloc != self.bucket or not key:
            raise DocumentMissing(f"not an object of s3://{self.bucket}: {uri!r}")
        return key

    def _call(
        self, operation: str, uri: str, expected: str | None = None, **params: Any
    ) -> dict[str, Any]:
        """One S3 operation, its failures translated into the store's three errors
        (``expected``: the digest or version a failed precondition reports)."""
        try:
            answer: dict[str, Any] = getattr(self._client, operation)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if code in _PRECONDITION or status in _PRECONDITION:
                raise DocumentChanged(uri, expected=expected or "", actual=None) from exc
            if code in _MISSING or status in _MISSING:
                raise DocumentMissing(f"no object {uri} ({code or status})") from exc
            raise DocumentStoreUnavailable(f"{operation} {uri}: {code or status}") from exc
        except BotoCoreError as exc:
            raise DocumentStoreUnavailable(f"{operation} {uri}: {exc}") from exc
        return answer


def _which(ref: DocumentRef) -> dict[str, str]:
    """The request parameters that pin ``ref``'s version (an ETag version: If-Match)."""
    if ref.version is None:
        return {}
    if ref.version.startswith('"'):
        return {"IfMatch": ref.version}
    return {"VersionId": ref.version}


def _version(answer: dict[str, Any]) -> str:
    """The version an S3 answer names: its version id, else its (quoted) ETag."""
    version = answer.get("VersionId")
    if version and version != "null":
        return str(version)
    return str(answer["ETag"])
