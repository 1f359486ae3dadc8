"""The reference ERP's ledger: the events it understands and how it books them.

Steps 3-8 of :mod:`benchmarks.erp_receiver` (which serves them over HTTP): an event
is validated into an :class:`Event`, then :func:`accept_delivery` records it in the
inbox and its posting (an invoice, a credit against the invoice it credits, or the
withdrawal of a superseded version) in one transaction, and :func:`apply_posting`
runs the posting step once per delivery id. Its tables are ``sql/erp/``'s.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from pipeline.identity import invoice_identity
from pipeline.jobs import EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED, EVENT_SUPERSEDED
from pipeline.queries import q


class CreditedInvoiceUnknown(Exception):
    """A credit note names an invoice this ledger never posted (its transaction rolls back)."""


async def apply_posting(conn: asyncpg.Connection, ledger: str, delivery_id: str) -> bool:
    """Run the posting step of one accepted delivery; True only if it posted the invoice.

    Two guards, counted apart so that a double posting stays observable: the
    delivery's ``applied_at`` lets the step run once per delivery id (a duplicate
    does nothing), and every run that passes it counts in the posting's
    ``applications`` before the job's ``posted_at`` lets only the first post.
    """
    async with conn.transaction():
        job_id = await conn.fetchval(q("erp_inbox_mark_applied_if_unapplied"), ledger, delivery_id)
        if job_id is None:
            return False  # this delivery's step already ran, or it carries no job
        if await conn.fetchval(q("erp_posting_count_application"), ledger, job_id) is None:
            raise RuntimeError(f"delivery {delivery_id} was accepted without its posting")
        return await conn.fetchval(q("erp_posting_apply_if_unposted"), ledger, job_id) is not None


async def apply_pending_postings(pool: asyncpg.Pool, ledger: str, limit: int = 1000) -> int:
    """Run the posting step of deliveries accepted but never applied (a crash after step 4)."""
    n = 0
    async with pool.acquire() as conn:
        for r in await conn.fetch(q("erp_inbox_list_unapplied"), ledger, limit):
            n += await apply_posting(conn, ledger, r["delivery_id"])
    return n


#: The answer to a credit for an invoice this ledger never posted.
CREDITED_INVOICE_UNKNOWN = "credited_invoice_unknown"


def invoice_key(invoice: Any, *, credit_note: bool = False) -> str | None:
    """The ERP's key for a supplier invoice: the identity Fenceline also checks. A credit
    note's is apart from the invoices' (its number may repeat an invoice's)."""
    ident = invoice_identity(invoice) if isinstance(invoice, dict) else None
    if ident is None:
        return None
    kind = "credit_note|" if credit_note else ""
    return f"{kind}{ident.supplier}|{ident.invoice_number}|{ident.gross_total}"


@dataclass(frozen=True)
class Supersession:
    """An ``invoice.superseded.v1``: ``job_id``'s invoice is replaced by ``superseded_by``."""

    job_id: uuid.UUID
    superseded_by: uuid.UUID
    version: int


@dataclass(frozen=True)
class Event:
    """A validated event: its type and, for a posting, the job, result and what it
    credits; for a withdrawal, the :class:`Supersession`."""

    type: str
    job_id: uuid.UUID | None = None
    invoice: Any = None
    #: The job of the invoice a credit note credits (None: none, or no credit note).
    credits_job_id: uuid.UUID | None = None
    supersession: Supersession | None = None

    @property
    def credit_note(self) -> bool:
        return self.type == EVENT_CREDIT_NOTE_CREATED


def validate_event(event: Any, tenant_id: uuid.UUID | None) -> Event:
    """The event of a well-formed body; ValueError otherwise."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ValueError("event must be an object with a string 'type'")
    data = event.get("data")
    if not isinstance(data, dict):
        raise ValueError("event 'data' must be an object")
    if event["type"] == EVENT_SUPERSEDED:
        if tenant_id is not None and str(data.get("tenant_id")) != str(tenant_id):
            raise ValueError("event names a tenant this endpoint does not serve")
        withdrawal = Supersession(
            uuid.UUID(str(data.get("job_id"))),
            uuid.UUID(str(data.get("superseded_by"))),
            int(str(data.get("version"))),
        )
        return Event(event["type"], supersession=withdrawal)
    if event["type"] not in (EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED):
        return Event(event["type"])
    job_id = uuid.UUID(str(data.get("job_id")))
    if tenant_id is not None and str(data.get("tenant_id")) != str(tenant_id):
        raise ValueError("event names a tenant this endpoint does not serve")
    if not isinstance(data.get("result"), dict):
        raise ValueError(f"{event['type']} needs a 'result' object")
    credits = None
    if event["type"] == EVENT_CREDIT_NOTE_CREATED:
        if data["result"].get("document_type") != "credit_note":
            raise ValueError("credit_note.created.v1 carries a result that is no credit note")
        credited = data.get("credited_invoice")
        if credited is not None and not isinstance(credited, dict):
            raise ValueError("'credited_invoice' must be an object or null")
        credits = uuid.UUID(str(credited["job_id"])) if credited else None
    return Event(event["type"], job_id, data["result"], credits)


async def accept_delivery(
    pool: asyncpg.Pool, ledger: str, delivery_id: str, digest: str, event: Event, key: str | None
) -> str:
    """Step 3 in one transaction; raises UniqueViolationError for a duplicate invoice.
    ``credited_invoice_unknown``: a credit for an invoice this ledger never posted
    (rolled back: nothing of the delivery is kept)."""
    job_id = event.job_id
    async with pool.acquire() as conn, conn.transaction():
        inserted = await conn.fetchval(
            q("erp_inbox_insert_if_new"), ledger, delivery_id, digest, event.type, job_id
        )
        if inserted is None:
            existing = await conn.fetchrow(q("erp_inbox_lock"), ledger, delivery_id)
            if existing["payload_digest"] != digest:
                await conn.fetchval(q("erp_inbox_count_conflict"), ledger, delivery_id)
                return "conflict"
            await conn.fetchval(q("erp_inbox_count_duplicate"), ledger, delivery_id)
            return "duplicate"
        withdrawal = event.supersession
        if withdrawal is not None:
            # Withdraw the old version now: its posting releases its invoice key,
            # so the new version (which Fenceline sends after this) can post.
            await conn.fetchval(
                q("erp_supersession_insert_if_new"),
                ledger,
                withdrawal.job_id,
                withdrawal.superseded_by,
                withdrawal.version,
                delivery_id,
            )
            await conn.fetchval(
                q("erp_posting_supersede_if_current"),
                ledger,
                withdrawal.job_id,
                withdrawal.superseded_by,
            )
        if job_id is not None and event.credit_note:
            credited = event.credits_job_id
            if credited is not None and not await conn.fetchval(
                q("erp_posting_invoice_posted"), ledger, credited
            ):
                raise CreditedInvoiceUnknown(str(credited))
            await conn.fetchval(
                q("erp_credit_note_posting_insert_if_new"),
                ledger,
                job_id,
                delivery_id,
                event.invoice,
                key,
                credited,
            )
        elif job_id is not None:
            await conn.fetchval(
                q("erp_posting_insert_if_new"),
                ledger,
                job_id,
                delivery_id,
                event.invoice,
                key,
            )
        return "accepted"
