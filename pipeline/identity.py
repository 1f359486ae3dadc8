"""Identity of documents and requests.

A filename is not document identity: the content digest is. The request hash
covers everything that changes the result — document version, extraction
schema version, model policy and result-affecting options — as canonical JSON,
so the same idempotency key with a different request is detected (409).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def content_digest(content: bytes) -> str:
    """sha256 hex of the exact document bytes."""
    return hashlib.sha256(content).hexdigest()


def object_version(digest: str) -> str:
    """The immutable version string stored with a document: its content address."""
    return f"sha256:{digest}"


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def request_hash(
    *,
    object_version: str,
    schema_version: int,
    model_policy: str,
    options: dict[str, Any] | None = None,
) -> str:
    """sha256 of the canonical request: what decides whether two requests are 'the same'."""
    body = {
        "object_version": object_version,
        "schema_version": schema_version,
        "model_policy": model_policy,
        "options": options or {},
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()
