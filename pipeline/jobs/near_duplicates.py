"""Possible duplicate invoices: near misses of the exact identity, held for review.

:mod:`pipeline.jobs.duplicates` stops the same supplier invoice (supplier, number,
gross total) from being posted twice. Two near misses escape it and are the ones
accounts payable sees in practice:

* ``number``: the same supplier and invoice number with another total (an amended
  invoice, or a misread amount);
* ``formatted``: the same supplier, total and issue date with a number that differs
  only in how it is printed ("INV-0042", "Nr. 42", "42": :func:`normalise_number`).

The transaction that commits a result claims both *near keys* of its invoice in
``invoice_near_keys`` (migration 033); a job that finds a key held by another job is
settled REVIEW_REQUIRED ``possible_duplicate`` naming that job, so it creates no ERP
delivery until a reviewer approves it. Ownership follows the exact check: a job
awaiting review holds its keys, a rejected one does not. The primary key decides
races: of two near duplicates committing at once, the second waits for the first
and then finds its key held.

A key is HMAC-SHA256 under a server secret (:func:`near_key_secret`) over the
tenant, the kind and the values, so the table holds no invoice number in clear and
a key of one tenant says nothing about another's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from pipeline.identity import invoice_identity
from pipeline.queries import q
from pipeline.settings import Settings

log = logging.getLogger(__name__)

#: The validation reason of a job another job's invoice may duplicate.
POSSIBLE_DUPLICATE = "possible_duplicate"

NearKind = Literal["number", "formatted"]

#: Words printed before an invoice number that are no part of it (upper case, without
#: separators); longest first, so "INVOICENO" is taken whole rather than as "INV".
NUMBER_PREFIXES = tuple(
    sorted(
        (
            "INVOICENUMBER",
            "INVOICENO",
            "INVOICENR",
            "INVOICE",
            "INV",
            "RECHNUNGSNUMMER",
            "RECHNUNGSNR",
            "RECHNUNG",
            "RGNR",
            "RG",
            "RE",
            "FACTURE",
            "FAKTURA",
            "FACT",
            "NUMBER",
            "NUM",
            "NR",
            "NO",
        ),
        key=len,
        reverse=True,
    )
)

_TOKENS = re.compile(r"[^\W_]+")

_DETAILS: dict[NearKind, str] = {
    "number": "the same supplier and invoice number with another total is job {job}",
    "formatted": (
        "the same supplier, total and issue date with an invoice number printed"
        " differently is job {job}"
    ),
}


def normalise_number(number: str) -> str:
    """An invoice number without its formatting: what two printings of it share.

    Upper case; separators and spaces dropped; leading prefix words
    (:data:`NUMBER_PREFIXES`: "INV-", "RE", "Nr.") dropped, whether printed apart
    or glued to the digits; leading zeros dropped. A number that is nothing but a
    prefix word or zeros keeps its last character, so it never normalises to "".
    """
    tokens = [t.upper() for t in _TOKENS.findall(number)]
    while len(tokens) > 1 and tokens[0] in NUMBER_PREFIXES:
        tokens.pop(0)
    joined = "".join(tokens)
    for prefix in NUMBER_PREFIXES:
        rest = joined[len(prefix) :]
        if joined.startswith(prefix) and rest[:1].isdigit():
            joined = rest
            break
    stripped = joined.lstrip("0")
    return stripped or joined[-1:]


@dataclass(frozen=True)
class NearKey:
    """One keyed hash a result claims: its kind and 32 bytes of HMAC-SHA256."""

    kind: NearKind
    digest: bytes


def near_keys(secret: bytes, tenant_id: uuid.UUID, result: Mapping[str, Any]) -> list[NearKey]:
    """The near keys of a result: none without an invoice identity; ``formatted``
    only with an issue date."""
    ident = invoice_identity(result)
    if ident is None:
        return []

    def key(kind: NearKind, *parts: str) -> NearKey:
        msg = "\x1f".join((kind, str(tenant_id), ident.supplier, *parts)).encode()
        return NearKey(kind, hmac.new(secret, msg, hashlib.sha256).digest())

    keys = [key("number", ident.invoice_number)]
    raw = result.get("issue_date")
    issued = raw.get("value") if isinstance(raw, dict) else raw
    if issued:
        issue_date = "".join(str(issued).split())
        number = normalise_number(ident.invoice_number)
        keys.append(key("formatted", number, ident.gross_total, issue_date))
    return keys


@dataclass(frozen=True)
class PossibleDuplicate:
    """Another job holding a near key of this one's invoice, and which kind."""

    other_job: uuid.UUID
    kind: NearKind


async def claim_near_keys(
    conn: asyncpg.Connection,
    secret: bytes,
    claims: Sequence[tuple[uuid.UUID, uuid.UUID, Mapping[str, Any]]],
) -> dict[uuid.UUID, PossibleDuplicate | None]:
    """Claim the near keys of each ``(tenant, job, result)`` in ``conn``'s transaction.

    The keys no one holds (the common case) are claimed by one statement; one found
    held is taken over from a rejected job or names its owner. Returns, per job, the
    first other job found holding one of its keys (``number`` before ``formatted``),
    or None. Of two jobs of the batch sharing a key, the one first in job order
    owns it. A job keeps the keys it claimed even when another key flags it.
    """
    offered = [
        (tenant, job, k)
        for tenant, job, result in sorted(claims, key=lambda c: c[1])
        for k in near_keys(secret, tenant, result)
    ]
    out: dict[uuid.UUID, PossibleDuplicate | None] = {job: None for _, job, _ in claims}
    if not offered:
        return out
    rows = await conn.fetch(
        q("invoice_near_key_insert_batch_if_new"),
        [tenant for tenant, _, _ in offered],
        [k.kind for _, _, k in offered],
        [k.digest for _, _, k in offered],
        [job for _, job, _ in offered],
    )
    won = {(r["tenant_id"], r["kind"], bytes(r["key_hash"]), r["job_id"]) for r in rows}
    for tenant, job, k in offered:
        if (tenant, k.kind, k.digest, job) in won:
            continue
        if await conn.fetchval(
            q("invoice_near_key_take_over_if_rejected"), tenant, k.kind, k.digest, job
        ):
            continue
        owner = await conn.fetchval(q("invoice_near_key_owner"), tenant, k.kind, k.digest)
        if owner is not None and owner != job and out[job] is None:
            out[job] = PossibleDuplicate(owner, k.kind)
    return out


def flag_possible_duplicate(
    validation: dict[str, Any], duplicate: PossibleDuplicate
) -> dict[str, Any]:
    """``validation`` with a ``possible_duplicate`` reason naming the other job, for review."""
    reason = {
        "code": POSSIBLE_DUPLICATE,
        "field": "invoice_number",
        "detail": _DETAILS[duplicate.kind].format(job=duplicate.other_job),
        "other_job_id": str(duplicate.other_job),
        "match": duplicate.kind,
    }
    return {
        **validation,
        "decision": "REVIEW_REQUIRED",
        "reasons": [*(validation.get("reasons") or []), reason],
    }


async def near_key_secret(conn: asyncpg.Connection, settings: Settings) -> bytes:
    """The HMAC key of the near keys: configured, derived, or (development) stored.

    ``duplicate_key_secret`` when set; else derived from ``webhook_secret_key`` (the
    server's key for secrets at rest) under a label of its own; else the random
    secret migration 033 stored in ``server_secrets``, with a warning.
    """
    if settings.duplicate_key_secret is not None:
        configured = settings.duplicate_key_secret.get_secret_value().encode()
        if len(configured) < 32:
            raise ValueError("duplicate_key_secret must have at least 32 characters")
        return hashlib.sha256(b"fenceline invoice near keys\x00" + configured).digest()
    if settings.webhook_secret_key is not None:
        master = base64.b64decode(settings.webhook_secret_key.get_secret_value())
        return hmac.new(master, b"fenceline invoice near keys v1", hashlib.sha256).digest()
    log.warning(
        "possible-duplicate keys use the development secret stored in the database: set "
        "FENCELINE_DUPLICATE_KEY_SECRET (32+ characters) outside development"
    )
    stored = await conn.fetchval(q("server_secret_get"), "invoice_near_keys")
    if stored is None:
        raise RuntimeError("server_secrets holds no invoice_near_keys secret (migration 033)")
    return bytes(stored)
