"""Credit notes linked to the invoice they credit, decided when their result commits.

A credit note's result (contract v3 ``document_type: credit_note``) may name its
preceding invoice (EN 16931 BG-3, ``preceding_invoice``). The transaction that commits
the result looks that number up among the tenant's delivered invoices by exact
identity (:func:`~pipeline.identity.invoice_identity`'s supplier and number, the
``invoice_identities`` rows the duplicate check writes) and:

* one found: links the two in ``credit_note_links`` (migration 037); the ERP's
  ``credit_note.created.v1`` names that job (``pipeline.delivery``);
* none: REVIEW_REQUIRED ``credit_note_reference_unknown``, since an ERP given a credit
  for an invoice it never received cannot apply it (the invoice may be awaiting review,
  be another supplier's, or be misprinted);
* several (the same supplier and number with other totals): REVIEW_REQUIRED
  ``credit_note_reference_ambiguous`` naming them.

A credit note without a reference is credited to no invoice (EN 16931 makes BG-3
optional: a volume rebate credits a period) and is delivered unlinked; one with several
references never gets here as SUCCEEDED (the reader reviews it). Linking needs the
invoices' identities, which the duplicate check writes: with
``FENCELINE_DUPLICATE_INVOICE_CHECK=false`` every referenced invoice is unknown.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg

from pipeline.errors import OwnershipError
from pipeline.identity import invoice_identity
from pipeline.jobs.duplicates import keyed_identity
from pipeline.queries import q

#: Review reasons the link step writes (``pipeline.invoice.ReasonCode`` names them too).
REFERENCE_UNKNOWN = "credit_note_reference_unknown"
REFERENCE_AMBIGUOUS = "credit_note_reference_ambiguous"


def credited_number(result: Mapping[str, Any]) -> str | None:
    """The preceding invoice number of a credit note's result; None for anything else."""
    if result.get("document_type") != "credit_note":
        return None
    preceding = result.get("preceding_invoice")
    number = preceding.get("number") if isinstance(preceding, dict) else None
    return number if isinstance(number, str) and number.strip() else None


def is_linkable(result: Mapping[str, Any]) -> bool:
    """Whether committing ``result`` runs the link step (a credit note with a reference)."""
    return credited_number(result) is not None


async def link_credit_note(
    conn: asyncpg.Connection,
    secret: bytes,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    result: Mapping[str, Any],
) -> dict[str, Any] | None:
    """Link a credit note's result to the invoice it credits, in ``conn``'s transaction.

    Returns the review reason to add (unknown or ambiguous reference), or None: linked,
    or nothing to link (no credit note, no reference).
    """
    number = credited_number(result)
    if number is None:
        return None
    named = invoice_identity({"supplier": result.get("supplier"), "invoice_number": number})
    # invoice_identities keeps keyed hashes (pipeline/jobs/duplicates.py)
    ident = None if named is None else keyed_identity(secret, tenant_id, named)
    found: list[uuid.UUID] = (
        []
        if ident is None
        else [
            r["job_id"]
            for r in await conn.fetch(
                q("credit_note_invoice_find"),
                tenant_id,
                ident.supplier,
                ident.invoice_number,
                job_id,
            )
        ]
    )
    if len(found) == 1:
        linked = await conn.fetchval(q("credit_note_link_upsert"), job_id, tenant_id, found[0])
        if linked is None:
            raise OwnershipError(f"credit note {job_id}: linked to another tenant's job")
        return None
    await conn.execute(q("credit_note_link_delete_for_job"), job_id, tenant_id)
    if not found:
        return {
            "code": REFERENCE_UNKNOWN,
            "field": "preceding_invoice",
            "detail": f"the credited invoice {number!r} is no delivered invoice of this supplier",
            "rule": "credit_notes.reference_unknown",
        }
    return {
        "code": REFERENCE_AMBIGUOUS,
        "field": "preceding_invoice",
        "detail": f"the credited invoice {number!r} is more than one delivered invoice "
        f"of this supplier (jobs {', '.join(map(str, found))}, and maybe more)",
        "rule": "credit_notes.reference_ambiguous",
        "other_job_id": str(found[0]),
    }


def flag_for_review(validation: dict[str, Any], reason: dict[str, Any]) -> dict[str, Any]:
    """``validation`` REVIEW_REQUIRED with ``reason`` added."""
    return {
        **validation,
        "decision": "REVIEW_REQUIRED",
        "reasons": [*(validation.get("reasons") or []), reason],
    }
