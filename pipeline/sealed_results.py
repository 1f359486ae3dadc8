"""Extracted personal data sealed inside a stored result: the IBAN, and the account a
direct debit debits.

A result is a JSON document (``extraction_results.result``) that SQL reads in
places (the console's supplier search, the credit-note filter, the delivery body it
builds); the IBAN is the personal datum the issue names and no SQL reads it, and a
direct debit's debited account (contract v3's ``debited_account``, EN 16931 BT-91: the
buyer's account, read from an e-invoice's XML) is the same kind of datum. So those
members alone are sealed (:data:`SEALED_FIELDS`): in place of each one's object
(``{"value": ..., "evidence": {...}}``) the stored result holds one sealed token, the
object's JSON text sealed under the tenant's data key (:mod:`pipeline.data_keys`) with
associated data naming the tenant and :func:`result_subject` (the job and the member),
so a token copied to another job's, tenant's or member's place does not open.

Invariants:

* **No escape is needed**: ``iban`` and ``debited_account`` are an object or null in
  every result; a string there is a sealed token. A result written before sealing (or with no KEK
  configured) holds the object and reads as it is.
* **Sealed once, where a result is written** (the worker's settle, one at a time or
  in a batch, and a reviewer's correction), **opened in Python where a result leaves
  the system or is shown**: the result API, ``explain``, the console, the demo's
  report, and the delivery dispatcher just before signing (:func:`open_body`).
* **A delivery sends identical bytes on every attempt**: the body is rendered once
  in SQL with the token in it; :func:`open_body` replaces exactly the token's bytes
  with the JSON text that was sealed, which is fixed, so every attempt signs and
  sends the same bytes. The sealed text is written as PostgreSQL writes ``jsonb``
  (:func:`jsonb_text`), so the body is the one an unsealed result would have given.
* Crypto-shredding the tenant's data key makes the sealed members unreadable with its text:
  :meth:`~pipeline.data_keys.DataKeys.open_text` raises
  :class:`~pipeline.errors.DataKeyShredded`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, TypeGuard

import asyncpg

from pipeline.data_keys import DataKeys
from pipeline.envelope import is_armored
from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable

#: Every failure to open a sealed value (what ``explain`` marks instead of raising).
UNREADABLE = (DataKeyShredded, DataKeyNotHere, DataKeyUnavailable)

#: The result members sealed at rest (each an object or null when open).
SEALED_FIELDS = ("iban", "debited_account")


def result_subject(job_id: uuid.UUID, field: str) -> str:
    """The subject a result member is sealed to: the job it belongs to (the tenant
    is bound separately)."""
    return f"result:{job_id}:{field}"


def jsonb_text(value: Any) -> str:
    """``value`` as PostgreSQL's ``jsonb::text`` writes it: keys ordered shorter
    first then bytewise, ``", "`` and ``": "`` separators, non-ASCII as is."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        items = (f"{json.dumps(k, ensure_ascii=False)}: {jsonb_text(value[k])}" for k in keys)
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def is_sealed(node: Any) -> TypeGuard[str]:
    """Whether a result member holds a sealed token (rather than its open object)."""
    return isinstance(node, str) and is_armored(node)


async def seal_result(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    result: dict[str, Any],
) -> dict[str, Any]:
    """``result`` with each of :data:`SEALED_FIELDS` sealed (a new dict; ``result``
    as it is when no KEK is configured or it holds none of them)."""
    if not keys.sealing or not isinstance(result, dict):
        return result
    out = dict(result)
    for field in SEALED_FIELDS:
        node = out.get(field)
        if isinstance(node, dict):
            subject = result_subject(job_id, field)
            out[field] = await keys.seal_text(conn, tenant, jsonb_text(node), subject)
    return out


async def open_result(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    result: dict[str, Any],
    *,
    mark: tuple[type[Exception], ...] = (),
) -> dict[str, Any]:
    """``result`` with its sealed members opened (a new dict when any was sealed).

    Args:
        mark: the failures that turn a member into ``{"value": "[<why>]",
            "evidence": null}`` (for pages that still show the rest) instead of
            raising: the console marks a shredded key, ``explain`` every failure.

    Raises:
        DataKeyShredded: the tenant's data key was shredded.
        DataKeyNotHere: no KEK for it here.
        DataKeyUnavailable: the token does not authenticate (moved or altered).
    """
    if not isinstance(result, dict) or not any(is_sealed(result.get(f)) for f in SEALED_FIELDS):
        return result
    out = dict(result)
    for field in SEALED_FIELDS:
        node = out.get(field)
        if not is_sealed(node):
            continue
        try:
            text = await keys.open_text(conn, tenant, node, result_subject(job_id, field))
        except mark as exc:
            out[field] = {"value": f"[{exc}]", "evidence": None}
        else:
            out[field] = json.loads(text)
    return out


async def open_body(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    body: bytes,
) -> bytes:
    """A delivery body with its result's sealed members opened, every other byte as
    rendered: each token (base64, so its JSON text is itself in quotes) is replaced by
    the JSON text that was sealed. A body with no result, or none sealed, is returned
    as it is.

    Raises:
        DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as :func:`open_result`;
        DataKeyUnavailable also when a token is not found exactly once in the body.
    """
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    data = doc.get("data") if isinstance(doc, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict):
        return body
    for field in SEALED_FIELDS:
        token = result.get(field)
        if not is_sealed(token):
            continue
        literal = json.dumps(token).encode()
        text = await keys.open_text(conn, tenant, token, result_subject(job_id, field))
        if body.count(literal) != 1:  # pragma: no cover - a token is unique by its nonce
            raise DataKeyUnavailable(f"delivery body of job {job_id}: {field} token not unique")
        body = body.replace(literal, text.encode())
    return body


async def seal_changes(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    changes: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """A correction's field changes (``{"field", "before", "after", ...}``) with the
    before and after values of each of :data:`SEALED_FIELDS` sealed, as in the result
    (the values of an IBAN are IBANs, never text that looks sealed)."""
    if not keys.sealing:
        return changes
    out = []
    for change in changes:
        field = change.get("field")
        if field in SEALED_FIELDS:
            change = dict(change)
            for side in ("before", "after"):
                if isinstance(change.get(side), str):
                    subject = result_subject(job_id, str(field))
                    change[side] = await keys.seal_text(conn, tenant, change[side], subject)
        out.append(change)
    return out


async def open_changes(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    changes: list[dict[str, Any]],
    *,
    mark: tuple[type[Exception], ...] = (),
) -> list[dict[str, Any]]:
    """The changes :func:`seal_changes` sealed, opened (``mark``: as :func:`open_result`,
    a value that does not open becomes ``"[<why>]"``)."""
    out = []
    for change in changes:
        if isinstance(change, dict) and change.get("field") in SEALED_FIELDS:
            change = dict(change)
            for side in ("before", "after"):
                value = change.get(side)
                if is_sealed(value):
                    subject = result_subject(job_id, str(change["field"]))
                    try:
                        change[side] = await keys.open_text(conn, tenant, value, subject)
                    except mark as exc:
                        change[side] = f"[{exc}]"
        out.append(change)
    return out
