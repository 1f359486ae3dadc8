"""Duplicate supplier invoices across jobs: the first job to commit an invoice owns it.

The ERP deduplicates by job, and an idempotency key by request; neither stops the
same supplier invoice, submitted again under a new key (a rescan, a second
upload), from being posted twice. So the transaction that commits a result also
claims the result's :class:`~pipeline.identity.InvoiceIdentity` in
``invoice_identities``. A job that finds the identity held by another job is
settled REVIEW_REQUIRED with the reason ``duplicate_invoice`` naming that job,
so it never creates an ERP delivery; a reviewer decides. A job awaiting review
holds the identity too (approving it would deliver it); one a reviewer rejected
does not, and the next job of that invoice takes it over. Near misses of the
identity (another total, a number printed differently) are
:mod:`pipeline.jobs.near_duplicates`.

The table and its primary key hold no invoice number, supplier or amount: each part
of the identity is stored as an HMAC-SHA256 under the server secret the near keys use
(:func:`keyed_identity`; migration 039), so equal identities still meet in the index
and nobody without the secret reads them back.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from pipeline.identity import DUPLICATE_INVOICE, InvoiceIdentity, invoice_identity
from pipeline.queries import q


def keyed_identity(secret: bytes, tenant_id: uuid.UUID, ident: InvoiceIdentity) -> InvoiceIdentity:
    """``ident`` as ``invoice_identities`` keeps it: each part the hex HMAC-SHA256 under
    ``secret`` of the part's name, the tenant and its value. Equal parts of one tenant
    hash equal (the duplicate check and a credit note's supplier + number lookup
    still match in the index); no part is readable without the secret."""

    def part(name: str, value: str) -> str:
        msg = "\x1f".join(("invoice identity v1", name, str(tenant_id), value)).encode()
        return hmac.new(secret, msg, hashlib.sha256).hexdigest()

    return InvoiceIdentity(
        part("supplier", ident.supplier),
        part("invoice_number", ident.invoice_number),
        part("gross_total", ident.gross_total),
    )


async def claim_invoice(
    conn: asyncpg.Connection,
    secret: bytes,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    result: dict[str, Any],
) -> uuid.UUID | None:
    """Claim the result's invoice identity for ``job_id`` in ``conn``'s transaction.

    Returns the other job that already holds it, or None (claimed now, taken
    over from a rejected job, held by this job already, or the result names no
    invoice).
    """
    found = invoice_identity(result)
    if found is None:
        return None
    ident = keyed_identity(secret, tenant_id, found)
    key = (tenant_id, ident.supplier, ident.invoice_number, ident.gross_total)
    if await conn.fetchval(q("invoice_identity_insert_if_new"), *key, job_id) is not None:
        return None
    if await conn.fetchval(q("invoice_identity_take_over_if_rejected"), *key, job_id):
        return None
    owner: uuid.UUID | None = await conn.fetchval(q("invoice_identity_owner"), *key)
    return owner if owner is not None and owner != job_id else None


async def claim_invoices(
    conn: asyncpg.Connection,
    secret: bytes,
    claims: Sequence[tuple[uuid.UUID, uuid.UUID, dict[str, Any]]],
) -> dict[uuid.UUID, uuid.UUID | None]:
    """:func:`claim_invoice` for each ``(tenant, job, result)`` of a batch, in order.

    The identities no one holds yet (the common case) are claimed by one statement;
    only those found held take :func:`claim_invoice`'s other two steps, one by one.
    Returns, per job, the other job that holds its invoice, or None. Two jobs of the
    batch with one identity: the first in ``claims`` owns it, as one at a time.
    """
    idents = [(tenant, job, invoice_identity(result)) for tenant, job, result in claims]
    keyed = [
        (tenant, job, keyed_identity(secret, tenant, ident))
        for tenant, job, ident in idents
        if ident is not None
    ]
    if not keyed:
        return {job: None for _, job, _ in idents}
    rows = await conn.fetch(
        q("invoice_identity_insert_batch_if_new"),
        [tenant for tenant, _, _ in keyed],
        [ident.supplier for _, _, ident in keyed],
        [ident.invoice_number for _, _, ident in keyed],
        [ident.gross_total for _, _, ident in keyed],
        [job for _, job, _ in keyed],
    )
    claimed = {r["job_id"] for r in rows}
    out: dict[uuid.UUID, uuid.UUID | None] = {}
    for (tenant, job, result), (_, _, ident) in zip(claims, idents, strict=True):
        if ident is None or job in claimed:
            out[job] = None
        else:  # held, by a rejected job, by this job already, or by another
            out[job] = await claim_invoice(conn, secret, tenant, job, result)
    return out


def flag_duplicate(validation: dict[str, Any], other_job: uuid.UUID) -> dict[str, Any]:
    """``validation`` with a ``duplicate_invoice`` reason naming ``other_job``, for review."""
    reason = {
        "code": DUPLICATE_INVOICE,
        "field": "invoice_number",
        "detail": f"the same supplier invoice is job {other_job}",
        "other_job_id": str(other_job),
    }
    return {
        **validation,
        "decision": "REVIEW_REQUIRED",
        "reasons": [*(validation.get("reasons") or []), reason],
    }
