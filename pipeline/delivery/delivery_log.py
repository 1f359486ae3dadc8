"""The tenant's delivery log: every delivery with its attempts, and resending one.

What a tenant reads (``GET /v1/deliveries``, the console's Deliveries pages) and the
one write it may make to a delivery: a **resend**. Invariants (tests in
``tests/integration/test_delivery_log.py`` and ``tests/browser/test_delivery_log_browser.py``):

* **Tenant-scoped**: every read and the resend take the tenant; another tenant's
  delivery is :class:`~pipeline.errors.NotFound` exactly like a missing one.
* **A resend is a new attempt of the same delivery**: the same id (the ``webhook-id``)
  and the same body bytes, re-signed with a fresh timestamp by the dispatcher. The
  receiver deduplicates on the id (docs/delivery.md, step 6), so a resend never
  posts to the ERP twice. It is one conditional write
  (``delivery_resend_if_resendable``): a delivered, failed or abandoned delivery goes
  back to ``pending``, due now; a waiting one is brought forward and stays waiting,
  so resending twice before the dispatcher came adds one attempt, not two.
* **Refusals write nothing** (:class:`~pipeline.errors.DeliveryRefused`): a delivery in
  flight (its outcome is not known yet), one whose body was erased with its job or
  removed by retention (nothing is ever sent with an empty body; the guard trigger
  of migration 032 refuses it as well), one its job's cancellation stopped, one whose
  endpoint is disabled.
* Each resend is an endpoint event (``resent``, naming the delivery and who asked).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_dicts, fetch_owned
from pipeline.errors import DeliveryRefused
from pipeline.queries import q


@dataclass(frozen=True)
class LogPosition:
    """Where a page of the log ends: the (created_at, id) of its last delivery."""

    created_at: datetime
    id: uuid.UUID


@dataclass(frozen=True)
class LogFilter:
    """Which deliveries a page holds (None: any)."""

    job_id: uuid.UUID | None = None
    endpoint_id: uuid.UUID | None = None
    state: str | None = None


class DeliveryLog:
    """Tenant-scoped reads of deliveries and their attempts, and the tenant's resend."""

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock | None = None) -> None:
        self.pool = pool
        self.clock = clock or DatabaseClock()

    async def page(
        self,
        tenant_id: uuid.UUID,
        wanted: LogFilter,
        *,
        after: LogPosition | None,
        limit: int,
    ) -> tuple[list[dict[str, Any]], LogPosition | None]:
        """Up to ``limit`` deliveries newest first after ``after``, and where the next
        page starts (None: this is the last page)."""
        rows = await fetch_dicts(
            self.pool,
            "delivery_log_page_for_tenant",
            tenant_id,
            wanted.job_id,
            wanted.endpoint_id,
            wanted.state,
            after.created_at if after else None,
            after.id if after else None,
            limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if more and rows else None
        return rows, LogPosition(last["created_at"], last["id"]) if last else None

    async def get(self, tenant_id: uuid.UUID, delivery_id: uuid.UUID) -> dict[str, Any]:
        """One delivery of the tenant, with ``attempt_log`` (oldest attempt first).

        Raises:
            NotFound: no such delivery of this tenant.
        """
        async with self.pool.acquire() as conn:
            row = await fetch_owned(
                conn, "delivery_log_get_for_tenant", delivery_id, tenant_id, "delivery"
            )
            attempts = await conn.fetch(
                q("delivery_attempt_list_for_tenant"), delivery_id, tenant_id
            )
        delivery = dict(row.items())
        delivery["resend_refusal"] = refusal(delivery)
        delivery["attempt_log"] = [dict(a.items()) for a in attempts]
        return delivery

    async def resend(
        self, tenant_id: uuid.UUID, delivery_id: uuid.UUID, *, requested_by: str
    ) -> dict[str, Any]:
        """Send the tenant's delivery again under the same delivery id; returns it.

        Raises:
            NotFound: no such delivery of this tenant.
            DeliveryRefused: it may not be resent now (nothing was written).
        """
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                q("delivery_resend_if_resendable"), delivery_id, tenant_id, now
            )
            if row is not None:
                detail = f"delivery {delivery_id} by {requested_by}"
                await conn.execute(
                    q("endpoint_event_insert"), row["endpoint_id"], tenant_id, "resent", detail, now
                )
                await conn.execute(q("delivery_notify"), str(delivery_id))
        if row is None:
            current = await self.get(tenant_id, delivery_id)  # NotFound for another tenant's
            why = current["resend_refusal"] or ("changed", "it changed meanwhile; try again")
            raise DeliveryRefused(
                f"delivery {delivery_id} cannot be resent: {why[1]}",
                reason=why[0],
                state=str(current["state"]),
            )
        return await self.get(tenant_id, delivery_id)


def refusal(delivery: dict[str, Any]) -> tuple[str, str] | None:
    """Why ``delivery`` (a ``delivery_log_get_for_tenant`` row) cannot be resent now,
    as (reason, words), or None when it can: the same conditions as the resend's
    conditional write, read to explain a refusal and to offer the console's button."""
    if delivery["state"] == "in_flight":
        return "in_flight", "an attempt is in flight; its outcome is not known yet"
    if not delivery["body_available"]:
        if delivery["job_erased"]:
            return "body_erased", "its body was erased with its job"
        return "body_removed", "its body was removed by retention"
    if delivery["final_reason"] == "job_cancelled":
        return "job_cancelled", "its job's cancellation stopped it"
    if delivery["endpoint_state"] != "active":
        return "endpoint_disabled", "its endpoint is disabled; enable it first"
    return None
