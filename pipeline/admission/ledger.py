"""The admission ledger: every grant and its settlement, durable in PostgreSQL.

The admission actor decides in memory (:mod:`pipeline.admission.policy`); this ledger
is the record that survives it (spec section 3: "reconcile reported usage
while retaining uncertain attempts in the accounting ledger"):

* a grant is written when it is handed out and settled exactly once — by the
  driver's release or, if the holder never comes back, by expiry, which keeps
  it charged at the full reservation (the call may have been billed);
* a restarted actor replays the last window (:meth:`AdmissionLedger.window`),
  so uncertain attempts keep counting against TPM across restarts and open
  grants can still be released by their drivers;
* reports put reserved, charged and reported tokens side by side per tenant
  and scope, so cost comes from reported usage, not from reservations.

Tenant ids are the policy's tenant strings (UUIDs). Every read except the
operator report and the actor's own replay is scoped to one tenant.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import asyncpg

from pipeline.admission.grants import (
    Grant,
    GrantOutcome,
    PriorityClass,
    Reconciliation,
    RestoredGrant,
)
from pipeline.admission.limits import AdmissionConfig
from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import OwnershipError
from pipeline.queries import q
from pipeline.records import from_record

SettledBy = Literal["driver", "expiry"]


@dataclass(frozen=True)
class GrantRecord:
    """One ledger row as stored."""

    id: uuid.UUID
    scope: str
    tenant_id: uuid.UUID
    job_id: uuid.UUID | None
    fence: int | None
    priority_class: PriorityClass
    reserved_tokens: int
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    charged_tokens: int | None
    request_charged: bool
    outcome: GrantOutcome
    settled_by: SettledBy | None
    granted_at: datetime
    settled_at: datetime | None


@dataclass(frozen=True)
class AdmissionUsage:
    """Reconciliation report of one tenant in one scope over a period.

    ``charged_tokens`` counts open grants at their reservation (they still hold
    it); ``uncertain_unreported_tokens`` is the reservation of uncertain attempts
    without reported usage — the part of the bill the system cannot know.
    """

    tenant_id: uuid.UUID
    scope: str
    grants: int
    open: int
    reconciled: int
    uncertain: int
    refunded: int
    expired: int
    requests_charged: int
    reserved_tokens: int
    charged_tokens: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    uncertain_unreported_tokens: int

    @property
    def reported_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def refunded_tokens(self) -> int:
        """Reservation returned by reconciliation (reserved minus charged)."""
        return self.reserved_tokens - self.charged_tokens

    def cost(self, price_per_1k: Decimal) -> Decimal:
        """Cost of the reported usage (what the provider says it billed)."""
        return Decimal(self.reported_tokens) * price_per_1k / 1000

    def cost_upper_bound(self, price_per_1k: Decimal) -> Decimal:
        """Reported cost plus the full reservation of every unreported uncertain attempt."""
        return (
            Decimal(self.reported_tokens + self.uncertain_unreported_tokens) * price_per_1k / 1000
        )


def _uuid(value: str | uuid.UUID | None) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(value)


def _record(row: Any) -> GrantRecord:
    return from_record(
        GrantRecord,
        row,
        convert={"priority_class": PriorityClass, "outcome": GrantOutcome},
    )


def _usage(row: Any) -> AdmissionUsage:
    return from_record(AdmissionUsage, row)


class AdmissionLedger:
    """Named-query persistence of grants; one per actor (or per tool)."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock | None = None) -> None:
        self._pool = pool
        self._clock = clock or DatabaseClock()

    async def record_grant(self, grant: Grant) -> None:
        """Write a new open grant (its tenant and job must exist)."""
        async with self._pool.acquire() as conn:
            await conn.execute(
                q("admission_grant_insert"),
                _uuid(grant.grant_id),
                grant.scope,
                _uuid(grant.tenant),
                _uuid(grant.job_id),
                grant.fence,
                str(grant.priority),
                grant.reserved_tokens,
                self._clock.now(),
                min(grant.max_output_tokens, grant.reserved_tokens),
            )

    async def record_settlement(self, rec: Reconciliation, at: datetime | None = None) -> None:
        """Settle an open grant with the policy's reconciliation.

        ``at`` is when the budget freed it, if that was before this write (an
        expiry frees the permit at once and writes in the background); default:
        the ledger's clock now.

        Raises:
            OwnershipError: the grant is unknown or already settled (e.g. expired
                before a late release): the first settlement stands.
        """
        settled_by: SettledBy = "expiry" if rec.expired else "driver"
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                q("admission_grant_settle_if_open"),
                _uuid(rec.grant_id),
                str(rec.outcome),
                rec.charged_tokens,
                rec.request_charged,
                rec.prompt_tokens,
                rec.completion_tokens,
                rec.cached_tokens,
                settled_by,
                at or self._clock.now(),
            )
        if row is None:
            raise OwnershipError(f"admission grant {rec.grant_id} is not open")

    async def record_limits(self, config: AdmissionConfig, incarnation: str) -> None:
        """Write the limits ``config`` enforces for its scope (``admission_scopes``).

        The actor's configuration lives in its process; this row is how the intake
        API and every other node learn them (the operator dashboard shows each
        tenant's usage against them). The latest writer wins.
        """
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                q("admission_scope_upsert"),
                config.scope,
                config.rpm,
                config.tpm,
                config.max_in_flight,
                config.max_concurrent_tokens,
                config.tenant_max_in_flight,
                dict(config.tenant_in_flight),
                float(config.window_seconds),
                incarnation,
                self._clock.now(),
            )
        if row is None:  # pragma: no cover - an upsert always returns its row
            raise OwnershipError(f"admission scope {config.scope} was not recorded")

    async def expire_stale(self, scope: str, older_than_seconds: float) -> list[uuid.UUID]:
        """Settle open grants older than the TTL as uncertain; returns their ids."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                q("admission_grant_expire_if_stale"),
                scope,
                float(older_than_seconds),
                self._clock.now(),
            )
        return [r["id"] for r in rows]

    async def window(self, scope: str, window_seconds: float = 60.0) -> list[RestoredGrant]:
        """Grants a restarted policy must replay: the last window plus open grants."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                q("admission_grant_list_window"), scope, float(window_seconds), self._clock.now()
            )
        return [
            RestoredGrant(
                grant_id=str(r["id"]),
                tenant=str(r["tenant_id"]),
                priority=PriorityClass(r["priority_class"]),
                reserved_tokens=r["reserved_tokens"],
                age_seconds=max(0.0, r["age_seconds"]),
                outcome=GrantOutcome(r["outcome"]),
                charged_tokens=r["charged_tokens"],
                request_charged=r["request_charged"],
                job_id=str(r["job_id"]) if r["job_id"] is not None else None,
                fence=r["fence"],
            )
            for r in rows
        ]

    async def grants_for_job(
        self, tenant_id: uuid.UUID | str, job_id: uuid.UUID | str
    ) -> list[GrantRecord]:
        """Every grant of one job's attempts, oldest first (tenant-scoped)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                q("admission_grant_list_by_job"), _uuid(tenant_id), _uuid(job_id)
            )
        return [_record(r) for r in rows]

    async def report(
        self,
        tenant_id: uuid.UUID | str,
        *,
        scope: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AdmissionUsage]:
        """One tenant's reconciliation report, one entry per scope."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                q("admission_report_by_tenant"), _uuid(tenant_id), scope, since, until
            )
        return [_usage(r) for r in rows]

    async def report_all(
        self,
        *,
        scope: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AdmissionUsage]:
        """Operator report across tenants (never expose it to a tenant principal)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(q("admission_report_list"), scope, since, until)
        return [_usage(r) for r in rows]
