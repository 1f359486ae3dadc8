"""ERP delivery: the delivery state machine and the dispatcher that drives it.

A delivery is one event for one endpoint. Invariants (tests in
``tests/integration/test_deliveries.py`` and ``tests/faults/test_delivery_faults.py``):

* Deliveries are created by :data:`delivery_settle_hook` inside the transaction
  that completes the job and writes its ``extraction.completed.v1`` outbox event,
  so a committed success always has its deliveries and a rolled-back one none.
  Delivery never touches inference: an ERP outage grows this table, nothing else.
* The delivery id is the ``webhook-id`` of every attempt; the body bytes are
  rendered once at creation and re-signed (with a fresh timestamp) per attempt,
  so a receiver can deduplicate on the id and compare digests.
* A claim bumps ``fence`` under a lease; every later write is conditional on the
  fence (zero rows → :class:`LeaseLost`). An expired lease is moved on with
  ``fence + 1`` and retried at once: the outcome of the lost attempt is unknown,
  and the receiver's deduplication makes the retry safe.
* Concurrency per endpoint is bounded across all dispatchers: a claim locks the
  endpoint row, then counts what is in flight in a later snapshot.
* Breaker and failure streaks live on the endpoint row, so every dispatcher sees
  the same state; one tenant's failing ERP never holds another tenant's work.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_dicts, fetch_owned
from pipeline.errors import NotFound
from pipeline.jobs import (
    EVENT_COMPLETED,
    EVENT_CREDIT_NOTE_CREATED,
    EVENT_SUPERSEDED,
    JobStore,
    Settled,
)
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "fenceline_deliveries"


class DeliveryState(StrEnum):
    #: Created with the job's completion. Left by a claim, or abandoned when the
    #: endpoint is disabled.
    PENDING = "pending"
    #: Owned by one dispatcher under ``fence`` until ``lease_until``. Left by that
    #: dispatcher's conditional outcome, or by the reaper when the lease expires.
    IN_FLIGHT = "in_flight"
    #: The endpoint answered 2xx. Left only by its tenant's resend (the same
    #: delivery id and body again, which the receiver deduplicates).
    DELIVERED = "delivered"
    #: Waiting for ``next_attempt_at`` (and a breaker that admits it). Left by a
    #: claim, or abandoned when the endpoint is disabled.
    RETRY_SCHEDULED = "retry_scheduled"
    #: The endpoint refused (non-retryable 4xx) or the retry horizon ran out.
    #: Left only by an operator redrive or its tenant's resend.
    FAILED = "failed"
    #: The endpoint was disabled (410 Gone, failing too long, or by its tenant).
    #: Left only by an operator redrive or its tenant's resend.
    ABANDONED = "abandoned"


TRANSITIONS: frozenset[tuple[DeliveryState, DeliveryState]] = frozenset(
    {
        (DeliveryState.PENDING, DeliveryState.IN_FLIGHT),
        (DeliveryState.PENDING, DeliveryState.ABANDONED),
        (DeliveryState.RETRY_SCHEDULED, DeliveryState.IN_FLIGHT),
        (DeliveryState.RETRY_SCHEDULED, DeliveryState.ABANDONED),
        (DeliveryState.IN_FLIGHT, DeliveryState.DELIVERED),
        (DeliveryState.IN_FLIGHT, DeliveryState.RETRY_SCHEDULED),
        (DeliveryState.IN_FLIGHT, DeliveryState.FAILED),
        (DeliveryState.IN_FLIGHT, DeliveryState.ABANDONED),
        (DeliveryState.FAILED, DeliveryState.PENDING),
        (DeliveryState.ABANDONED, DeliveryState.PENDING),
        (DeliveryState.DELIVERED, DeliveryState.PENDING),
    }
)


class DeliveryCreation:
    """JobStore settle hook: create deliveries for SUCCEEDED jobs, in their transaction.

    An invoice is ``extraction.completed.v1``; a credit note ``credit_note.created.v1``
    only, naming the invoice it credits, so an ERP that knows invoices alone never posts
    a credit as an invoice to pay (an endpoint takes it by its event-type filter).
    A job that superseded another's invoice version (``Settled.supersedes``) also
    creates ``invoice.superseded.v1`` for the old job, and its own deliveries wait
    for that one at each endpoint (``after_id``), so the ERP sees them in order.

    :func:`job_store` registers it (as :data:`delivery_settle_hook`); build the
    system's store with that, so no caller can forget it. Idempotent (one delivery
    per endpoint, job and event type); other outcomes deliver nothing. A batch
    settled together (:meth:`many`) takes one statement, not one per job.
    """

    async def __call__(self, conn: asyncpg.Connection, settled: Settled) -> None:
        await self.many(conn, [settled])

    async def many(self, conn: asyncpg.Connection, settled: Sequence[Settled]) -> None:
        ids = [s.job_id for s in settled if s.state is JobState.SUCCEEDED]
        if ids:
            await conn.fetchrow(
                q("delivery_create_for_jobs"), ids, EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED
            )
        pairs = [
            (s.job_id, s.supersedes)
            for s in settled
            if s.state is JobState.SUCCEEDED and s.supersedes is not None
        ]
        if pairs:  # the old version's withdrawal first, then the new version
            await conn.fetchrow(
                q("delivery_create_for_supersessions"),
                [new for new, _ in pairs],
                [old for _, old in pairs],
                EVENT_SUPERSEDED,
                EVENT_COMPLETED,
            )


#: The system's delivery settle hook (a :class:`~pipeline.jobs.BatchSettleHook`).
delivery_settle_hook = DeliveryCreation()


def job_store(
    pool: asyncpg.Pool, settings: Settings | None = None, *, clock: Clock | None = None
) -> JobStore:
    """The job store as the system runs it: every success creates its ERP deliveries
    (:func:`delivery_settle_hook`) in the transaction that commits it.

    The API, the drivers and the benchmark runner build their store here; a bare
    :class:`~pipeline.jobs.JobStore` has no settle hooks (tests, read-only uses).
    """
    store = JobStore(pool, settings, clock=clock)
    store.settle_hooks.add(delivery_settle_hook)
    return store


class DeliveryStore:
    """Tenant-scoped reads of deliveries, and the operator's redrive."""

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock | None = None) -> None:
        self.pool = pool
        self.clock = clock or DatabaseClock()

    async def get(self, tenant_id: uuid.UUID, delivery_id: uuid.UUID) -> dict[str, Any]:
        async with self.pool.acquire() as conn:
            row = await fetch_owned(
                conn, "delivery_get_for_tenant", delivery_id, tenant_id, "delivery"
            )
        return dict(row.items())

    async def list_for_job(self, tenant_id: uuid.UUID, job_id: uuid.UUID) -> list[dict[str, Any]]:
        return await fetch_dicts(self.pool, "delivery_list_for_job", job_id, tenant_id)

    async def attempts(self, tenant_id: uuid.UUID, delivery_id: uuid.UUID) -> list[dict[str, Any]]:
        return await fetch_dicts(
            self.pool, "delivery_attempt_list_for_tenant", delivery_id, tenant_id
        )

    async def redrive(self, tenant_id: uuid.UUID, delivery_id: uuid.UUID) -> None:
        """Send a failed or abandoned delivery again, under the same delivery id."""
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                q("delivery_redrive_if_given_up"), delivery_id, tenant_id, self.clock.now()
            )
            if row is None:
                raise NotFound(
                    f"delivery {delivery_id} (or it is not failed/abandoned,"
                    " or its job was cancelled)"
                )
            await conn.execute(
                q("endpoint_event_insert"),
                row["endpoint_id"],
                tenant_id,
                "redriven",
                str(delivery_id),
                self.clock.now(),
            )
            await conn.execute(q("delivery_notify"), str(delivery_id))

    async def backlog(self) -> dict[str, Any]:
        """Counts per state and the oldest due delivery's age (operator view)."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(q("delivery_backlog_stats"), self.clock.now())
        return dict(row.items())
