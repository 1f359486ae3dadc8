"""The invoice text inside a stored result, sealed: every string a result holds but
the few SQL reads that are no invoice text.

A result is a JSON document (``extraction_results.result``). Its strings are the
invoice's text: the supplier's name, address and tax ids, the invoice number, each
line item's description, the amounts and dates as written, and every evidence quote
(a line of the invoice, word for word). Each of them is sealed under the tenant's data
key (:mod:`pipeline.data_keys`) with associated data naming the tenant and
:func:`result_subject` (the job and the top-level member it stands in), so a token
copied to another job's, tenant's or member's place does not open. The JSON's shape,
its numbers (evidence offsets, page numbers) and booleans stay open, and so do
:data:`OPEN_MEMBERS`: the document type (an enum: the delivery's event type and the
credit-note lookup read it in SQL) and the model's unsure field paths (the contract's
own names). The IBAN, a direct debit's debited account and a national account to pay
(:data:`SEALED_FIELDS`,
personal data) are sealed whole: their object's JSON text in one token, so not even
their evidence offsets show.

Invariants:

* **No escape is needed**: with a KEK every string of a sealed member is a token,
  so a text that merely looks sealed is itself inside a token; a result written
  before sealing (or with no KEK configured) holds its strings as they are and reads
  as it is.
* **Sealed once, where a result is written** (the worker's settle, one at a time or
  in a batch, and a reviewer's correction), **opened in Python where a result is read**:
  the result API, ``explain``, the console (its queue too: the supplier search filters
  opened names), a reviewer's approval (the duplicate check's identity), the demo's
  report, and the delivery dispatcher just before signing (:func:`open_body`).
* **A delivery sends identical bytes on every attempt**: the body is rendered once
  in SQL with the tokens in it; :func:`open_body` replaces exactly each token's bytes
  with the JSON text of what was sealed, which is fixed, so every attempt signs and
  sends the same bytes. That text is written as PostgreSQL writes ``jsonb``
  (:func:`jsonb_text`), so the body is the one an unsealed result would have given.
* Crypto-shredding the tenant's data key makes the sealed members unreadable with its text:
  :meth:`~pipeline.data_keys.DataKeys.open_text` raises
  :class:`~pipeline.errors.DataKeyShredded`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, TypeGuard

import asyncpg

from pipeline.data_keys import DataKeys
from pipeline.envelope import is_armored
from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable

#: Every failure to open a sealed value (what ``explain`` marks instead of raising).
UNREADABLE = (DataKeyShredded, DataKeyNotHere, DataKeyUnavailable)

#: The result members sealed whole, their object's JSON text in one token (personal
#: data: each an object or null when open).
SEALED_FIELDS = ("iban", "debited_account", "payee_account")
#: The result members kept open: SQL reads them and they hold no invoice text.
OPEN_MEMBERS = ("document_type", "uncertain_fields")


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
    """Whether a result's string holds a sealed token (rather than its open text)."""
    return isinstance(node, str) and is_armored(node)


def _member(path: str) -> str:
    """The top-level member a field path (``"supplier.name"``, ``"line_items[2].description"``)
    stands in."""
    return path.split(".", 1)[0].split("[", 1)[0]


def _map_strings(node: Any, fn: Callable[[str], str]) -> Any:
    """``node`` with each string in it (never a key) replaced by ``fn`` of it, in a fixed
    order (a dict's own order, a list's)."""
    if isinstance(node, str):
        return fn(node)
    if isinstance(node, dict):
        return {k: _map_strings(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [_map_strings(v, fn) for v in node]
    return node


def _sealable(result: dict[str, Any], job_id: uuid.UUID) -> list[tuple[str, str]]:
    """Each ``(text, subject)`` :func:`seal_result` seals, in the order it writes them."""
    items: list[tuple[str, str]] = []
    for member, node in result.items():
        subject = result_subject(job_id, member)
        if member in OPEN_MEMBERS:
            continue
        if member in SEALED_FIELDS:
            if isinstance(node, dict):
                items.append((jsonb_text(node), subject))
            continue

        def note(text: str, s: str = subject) -> str:
            items.append((text, s))
            return text

        _map_strings(node, note)
    return items


async def seal_result(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    result: dict[str, Any],
) -> dict[str, Any]:
    """``result`` with its invoice text sealed (a new dict; ``result`` as it is when no
    KEK is configured): each string of every member but :data:`OPEN_MEMBERS`, and each
    of :data:`SEALED_FIELDS` whole."""
    if not keys.sealing or not isinstance(result, dict):
        return result
    tokens = iter(await keys.seal_texts(conn, tenant, _sealable(result, job_id)))
    out: dict[str, Any] = {}
    for member, node in result.items():
        if member in OPEN_MEMBERS:
            out[member] = node
        elif member in SEALED_FIELDS:
            out[member] = next(tokens) if isinstance(node, dict) else node
        else:
            out[member] = _map_strings(node, lambda _text: next(tokens))
    return out


def _sealed_in(result: dict[str, Any], job_id: uuid.UUID) -> list[tuple[str, str]]:
    """Each ``(token, subject)`` in a stored result, in the order :func:`_open_with` reads them."""
    items: list[tuple[str, str]] = []
    for member, node in result.items():
        if member in OPEN_MEMBERS:
            continue
        subject = result_subject(job_id, member)

        def note(text: str, s: str = subject) -> str:
            if is_sealed(text):
                items.append((text, s))
            return text

        _map_strings(node, note)
    return items


def _open_with(result: dict[str, Any], opened: dict[str, str]) -> dict[str, Any]:
    """``result`` with each token replaced by what it sealed (``opened``, by token): a
    string, or the object a member of :data:`SEALED_FIELDS` was."""
    out: dict[str, Any] = {}
    for member, node in result.items():
        if member in OPEN_MEMBERS:
            out[member] = node
        elif member in SEALED_FIELDS and is_sealed(node):
            text = opened[node]
            out[member] = json.loads(text) if not text.startswith("[") else _marked(text)
        else:
            out[member] = _map_strings(node, lambda t: opened.get(t, t) if is_sealed(t) else t)
    return out


def _marked(why: str) -> dict[str, Any]:
    return {"value": why, "evidence": None}


async def open_result(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    result: dict[str, Any],
    *,
    mark: tuple[type[Exception], ...] = (),
) -> dict[str, Any]:
    """``result`` with its sealed values opened (a new dict when any was sealed).

    Args:
        mark: the failures that turn every sealed value into ``"[<why>]"`` (a member
            of :data:`SEALED_FIELDS` into ``{"value": "[<why>]", "evidence": null}``),
            for pages that still show the rest, instead of raising: the console marks
            a shredded key, ``explain`` every failure.

    Raises:
        DataKeyShredded: the tenant's data key was shredded.
        DataKeyNotHere: no KEK for it here.
        DataKeyUnavailable: a token does not authenticate (moved or altered).
    """
    if not isinstance(result, dict):
        return result
    sealed = _sealed_in(result, job_id)
    if not sealed:
        return result
    try:
        texts = await keys.open_pairs(conn, tenant, sealed)
    except mark as exc:
        texts = [f"[{exc}]"] * len(sealed)
    return _open_with(result, {token: text for (token, _), text in zip(sealed, texts, strict=True)})


async def open_body(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    body: bytes,
) -> bytes:
    """A delivery body with its result's sealed values opened, every other byte as
    rendered: each token (base64, so its JSON text is itself in quotes) is replaced,
    wherever the body holds it (a credit note's ``credited_invoice`` repeats its
    preceding invoice's number), by the JSON text of what was sealed. A body with no
    result, or none sealed, is returned as it is.

    Raises:
        DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as :func:`open_result`.
    """
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    data = doc.get("data") if isinstance(doc, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict):
        return body
    sealed = _sealed_in(result, job_id)
    if not sealed:
        return body
    texts = await keys.open_pairs(conn, tenant, sealed)
    whole = {result.get(f) for f in SEALED_FIELDS}
    for (token, _), text in zip(sealed, texts, strict=True):
        literal = json.dumps(token).encode()
        opened = text if token in whole else json.dumps(text, ensure_ascii=False)
        body = body.replace(literal, opened.encode())
    return body


async def seal_changes(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    changes: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """A correction's field changes (``{"field", "before", "after", ...}``) with each
    string before and after value sealed, to the member its field stands in (the field
    path itself is the contract's name, no invoice text)."""
    if not keys.sealing:
        return changes
    places = [
        (i, side)
        for i, change in enumerate(changes)
        for side in ("before", "after")
        if isinstance(change.get(side), str)
    ]
    tokens = await keys.seal_texts(
        conn,
        tenant,
        [
            (changes[i][side], result_subject(job_id, _member(str(changes[i].get("field")))))
            for i, side in places
        ],
    )
    out = [dict(change) for change in changes]
    for (i, side), token in zip(places, tokens, strict=True):
        out[i][side] = token
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
    places = [
        (i, side)
        for i, change in enumerate(changes)
        if isinstance(change, dict)
        for side in ("before", "after")
        if is_sealed(change.get(side))
    ]
    if not places:
        return changes
    sealed = [
        (changes[i][side], result_subject(job_id, _member(str(changes[i].get("field")))))
        for i, side in places
    ]
    try:
        texts = await keys.open_pairs(conn, tenant, sealed)
    except mark as exc:
        texts = [f"[{exc}]"] * len(sealed)
    out = [dict(c) if isinstance(c, dict) else c for c in changes]
    for (i, side), text in zip(places, texts, strict=True):
        out[i][side] = text
    return out


#: The subject a validation report's details are sealed to (with the job's id).
VALIDATION = "validation"
#: The lists of a validation report whose entries' ``detail`` quotes the invoice (a
#: supplier's name, a quote, a number as printed); their codes, fields and rule ids
#: are the product's own names, and SQL reads the codes.
DETAILED = ("reasons", "proofs", "overrides")


async def seal_reasons(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    reasons: list[Any],
) -> list[Any]:
    """Reasons (or proofs) with each one's ``detail`` sealed; as they are with no KEK."""
    if not keys.sealing:
        return reasons
    places = [
        i for i, r in enumerate(reasons) if isinstance(r, dict) and isinstance(r.get("detail"), str)
    ]
    subject = result_subject(job_id, VALIDATION)
    tokens = await keys.seal_texts(conn, tenant, [(reasons[i]["detail"], subject) for i in places])
    out = list(reasons)
    for i, token in zip(places, tokens, strict=True):
        out[i] = {**reasons[i], "detail": token}
    return out


async def open_reasons(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    reasons: list[Any],
    *,
    mark: tuple[type[Exception], ...] = (),
) -> list[Any]:
    """The reasons :func:`seal_reasons` sealed, opened (``mark``: as :func:`open_result`)."""
    places = [
        i for i, r in enumerate(reasons) if isinstance(r, dict) and is_sealed(r.get("detail"))
    ]
    if not places:
        return reasons
    subject = result_subject(job_id, VALIDATION)
    sealed = [(reasons[i]["detail"], subject) for i in places]
    try:
        texts = await keys.open_pairs(conn, tenant, sealed)
    except mark as exc:
        texts = [f"[{exc}]"] * len(sealed)
    out = list(reasons)
    for i, text in zip(places, texts, strict=True):
        out[i] = {**reasons[i], "detail": text}
    return out


async def seal_validation(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    validation: dict[str, Any],
) -> dict[str, Any]:
    """A validation report with the details of its :data:`DETAILED` lists sealed."""
    if not keys.sealing or not isinstance(validation, dict):
        return validation
    out = dict(validation)
    for name in DETAILED:
        if isinstance(out.get(name), list):
            out[name] = await seal_reasons(keys, conn, tenant, job_id, out[name])
    return out


async def open_validation(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job_id: uuid.UUID,
    validation: dict[str, Any],
    *,
    mark: tuple[type[Exception], ...] = (),
) -> dict[str, Any]:
    """The report :func:`seal_validation` sealed, opened (``mark``: as :func:`open_result`)."""
    if not isinstance(validation, dict):
        return validation
    out = dict(validation)
    for name in DETAILED:
        if isinstance(out.get(name), list):
            out[name] = await open_reasons(keys, conn, tenant, job_id, out[name], mark=mark)
    return out
