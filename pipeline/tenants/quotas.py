"""Admission before acceptance (spec section 3): tenant quotas and system capacity.

A queue does not create capacity, so intake refuses work it cannot honour
*before* anything is written:

* **Tenant quotas → 429.** Pending jobs, pending bytes and estimated tokens of
  the tenant's unsettled jobs (READY, RUNNING, RETRY_SCHEDULED), plus the spend
  reserved in the current budget period, each against the tenant's limit.
* **System capacity → 503.** The runnable backlog or the age of the oldest
  eligible job above the configured bounds, or the database unreachable.

Atomicity: :meth:`TenantQuota.admit` must run inside the accept transaction after
:meth:`TenantQuota.lock_tenant`, which takes a per-tenant transaction-scoped
advisory lock. Concurrent acceptances of one tenant therefore see each other's
committed jobs, and two requests can never both pass a check that only one of
them fits. A refusal raises before the job store writes, and the transaction
rolls back, so a refused request leaves no row behind. System capacity is a
coarse, cluster-wide signal: one reading is reused for
``capacity_check_interval_seconds`` instead of scanning the backlog per request.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import AdmissionRejected
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.spend import cost_of, reserve_spend

#: Namespace of the per-tenant admission advisory lock ("INTK").
ADMISSION_LOCK_NAMESPACE = 0x494E544B


@dataclass(frozen=True)
class Demand:
    """What one request would add to its tenant's pending work."""

    byte_size: int
    tokens: int
    cost: Decimal


@dataclass(frozen=True)
class CapacityReading:
    runnable: int
    oldest_runnable_age_seconds: float
    taken_at: float


def estimate_tokens(byte_size: int, settings: Settings) -> int:
    """Tokens to reserve for a document: prompt overhead + OCR text + output reserve.

    An upper-leaning estimate on purpose: admission must not under-reserve; the
    cluster's admission ledger reconciles it with reported usage later.
    """
    text = math.ceil(byte_size / settings.bytes_per_token)
    return settings.prompt_overhead_tokens + text + settings.output_reserve_tokens


def estimate_cost(tokens: int, settings: Settings) -> Decimal:
    """Spend reserved for ``tokens`` at the configured price, rounded up to 1e-6."""
    return cost_of(tokens, settings.token_price_per_1k)


def demand_for(byte_size: int, settings: Settings) -> Demand:
    tokens = estimate_tokens(byte_size, settings)
    return Demand(byte_size=byte_size, tokens=tokens, cost=estimate_cost(tokens, settings))


class TenantQuota:
    """Tenant quota and system capacity checks; see the module docstring."""

    def __init__(self, settings: Settings, *, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or DatabaseClock()
        self._reading: CapacityReading | None = None
        self._refresh = asyncio.Lock()

    # ------------------------------------------------------------ system level
    async def check_capacity(self, conn: asyncpg.Connection) -> CapacityReading:
        """Raise 503 :class:`AdmissionRejected` when the system backlog is over its bounds.

        ``conn`` is the caller's connection (used only when the cached reading is
        stale), so a check never waits for a second pooled connection.
        """
        reading = await self._capacity(conn)
        s = self.settings
        if reading.runnable > s.max_runnable_backlog:
            raise AdmissionRejected(
                f"runnable backlog {reading.runnable} is above {s.max_runnable_backlog}",
                status=503,
                reason="capacity_backlog",
                retry_after=s.capacity_retry_after_seconds,
            )
        if reading.oldest_runnable_age_seconds > s.max_oldest_runnable_age_seconds:
            raise AdmissionRejected(
                f"oldest eligible job waited {reading.oldest_runnable_age_seconds:.0f}s, "
                f"above {s.max_oldest_runnable_age_seconds:.0f}s",
                status=503,
                reason="capacity_oldest_age",
                retry_after=s.capacity_retry_after_seconds,
            )
        return reading

    async def _capacity(self, conn: asyncpg.Connection) -> CapacityReading:
        interval = self.settings.capacity_check_interval_seconds
        current = self._reading
        if current is not None and time.monotonic() - current.taken_at < interval:
            return current
        async with self._refresh:
            current = self._reading
            if current is not None and time.monotonic() - current.taken_at < interval:
                return current
            row = await conn.fetchrow(q("job_backlog_stats"), self.clock.now())
            age = row["oldest_runnable_age_seconds"]
            current = CapacityReading(
                runnable=int(row["runnable"]),
                oldest_runnable_age_seconds=float(age) if age is not None else 0.0,
                taken_at=time.monotonic(),
            )
            self._reading = current
            return current

    def forget_capacity(self) -> None:
        """Drop the cached reading so the next check reads the database."""
        self._reading = None

    # ------------------------------------------------------------ tenant level
    async def lock_tenant(self, conn: asyncpg.Connection, tenant_id: uuid.UUID) -> None:
        """Serialise this tenant's admissions until the caller's transaction ends."""
        await conn.execute(q("tenant_admission_lock"), ADMISSION_LOCK_NAMESPACE, str(tenant_id))

    async def admit(self, conn: asyncpg.Connection, tenant_id: uuid.UUID, demand: Demand) -> None:
        """Raise 429 :class:`AdmissionRejected` if ``demand`` exceeds any tenant quota.

        Must run inside the accept transaction, after :meth:`lock_tenant`.
        """
        row = await conn.fetchrow(
            q("tenant_admission_get"),
            tenant_id,
            self.settings.spend_period,
            self.clock.now(),
            None,
            None,
        )
        if row is None:  # pragma: no cover - a principal's tenant always exists
            raise RuntimeError(f"tenant {tenant_id} vanished during admission")
        self.check_quotas(row, demand)

    async def read_with_key(
        self,
        conn: asyncpg.Connection,
        tenant_id: uuid.UUID,
        idempotency_key: str,
        api_key_id: uuid.UUID | None = None,
    ) -> asyncpg.Record:
        """The tenant's quota row and the job ``idempotency_key`` already names, in one read.

        Must run inside the accept transaction, after :meth:`lock_tenant`; ``job_id``
        is NULL for a new key. Pass the row to :meth:`check_quotas`. With
        ``api_key_id`` the row's ``key_state`` says whether the caller's API key is
        still ``active`` (or ``revoked`` / ``expired``).
        """
        row = await conn.fetchrow(
            q("tenant_admission_get"),
            tenant_id,
            self.settings.spend_period,
            self.clock.now(),
            idempotency_key,
            api_key_id,
        )
        if row is None:  # pragma: no cover - a principal's tenant always exists
            raise RuntimeError(f"tenant {tenant_id} vanished during admission")
        return row

    def check_quotas(self, row: asyncpg.Record, demand: Demand) -> None:
        """Raise 429 :class:`AdmissionRejected` if ``demand`` does not fit ``row``
        (a ``tenant_admission_get`` row, read under the tenant's lock)."""
        retry = self.settings.quota_retry_after_seconds
        checks: list[tuple[str, int, int, str]] = [
            ("quota_pending_jobs", row["jobs"] + 1, row["max_pending_jobs"], "pending jobs"),
            (
                "quota_pending_bytes",
                row["bytes"] + demand.byte_size,
                row["max_pending_bytes"],
                "pending bytes",
            ),
            (
                "quota_pending_tokens",
                row["tokens"] + demand.tokens,
                row["max_pending_tokens"],
                "pending estimated tokens",
            ),
        ]
        for reason, would_be, limit, what in checks:
            if would_be > limit:
                raise AdmissionRejected(
                    f"{what} would be {would_be}, above the tenant's limit of {limit}",
                    status=429,
                    reason=reason,
                    retry_after=retry,
                )
        spent = Decimal(row["spent"])
        budget = Decimal(row["spend_budget"])
        if spent + demand.cost > budget:
            raise AdmissionRejected(
                f"spend {spent + demand.cost} would exceed the "
                f"{self.settings.spend_period}ly budget of {budget}",
                status=429,
                reason="quota_spend_budget",
                # The budget frees up when the period turns over, not before.
                retry_after=max(retry, float(row["seconds_to_next_period"])),
            )

    async def reserve(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID, demand: Demand
    ) -> None:
        """Hold the accepted job's estimated spend in the current budget period
        (released by the spend reconciler once the job settles)."""
        await reserve_spend(
            conn,
            tenant_id=tenant_id,
            job_id=job_id,
            amount=demand.cost,
            period=self.settings.spend_period,
            now=self.clock.now(),
        )
