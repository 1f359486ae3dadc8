"""Admission before acceptance (spec section 3): tenant quotas and system capacity.

A queue does not create capacity, so intake refuses work it cannot honour
*before* anything is written:

* **Tenant quotas → 429.** Pending jobs, pending bytes and estimated tokens of
  the tenant's unsettled jobs (READY, RUNNING, RETRY_SCHEDULED), plus the spend
  reserved in the current budget period, each against the tenant's limit.
* **System capacity → 503.** The runnable backlog or the age of the oldest
  eligible job above the configured bounds, or the database unreachable.

Atomicity: the decision is made in the accept statement itself
(``intake_accept``, migration 018), under a per-tenant transaction-scoped
advisory lock (:data:`ADMISSION_LOCK_NAMESPACE`). Concurrent acceptances of one
tenant therefore see each other's committed jobs, and two requests can never
both pass a check that only one of them fits. A refused request writes nothing;
:meth:`TenantQuota.quota_refusal` words the refusal the statement names. System
capacity is a coarse, cluster-wide signal: one reading is reused for
``capacity_check_interval_seconds`` instead of scanning the backlog per request,
and the accept statement is told whether it refuses.

Both ways in admit through here: the REST intake (:mod:`pipeline.api.intake`) and
the Kafka ingress (:mod:`pipeline.messaging.kafka_ingress`) build the statement's
:class:`~pipeline.jobs.records.AdmissionCheck` with :meth:`TenantQuota.check` and
word a refusing row with :meth:`TenantQuota.refusal`; a known key's row is a replay,
which admission never refuses.
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
from pipeline.jobs.acceptance import replay_of, request_hash_of
from pipeline.jobs.records import Accepted, AcceptRequest, AdmissionCheck, accepted_from_row
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.spend import estimate_cost as spend_estimate

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
    """Spend reserved for ``tokens`` at the default prompt and completion prices
    (the output reserve as completion), rounded up to 1e-6."""
    return spend_estimate(tokens, settings)


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

    async def check(
        self, conn: asyncpg.Connection, api_key_id: uuid.UUID | None, demand: Demand
    ) -> tuple[AdmissionRejected | None, AdmissionCheck]:
        """The capacity verdict (read on ``conn``) and what ``intake_accept`` decides
        with: the tenant's lock, the spend period, the caller's key and the cost."""
        capacity = await self.capacity_refusal(conn)
        return capacity, AdmissionCheck(
            lock_namespace=ADMISSION_LOCK_NAMESPACE,
            period=self.settings.spend_period,
            api_key_id=api_key_id,
            capacity_refused=capacity is not None,
            cost=demand.cost,
        )

    def answer(
        self,
        row: asyncpg.Record,
        req: AcceptRequest,
        demand: Demand,
        capacity: AdmissionRejected | None,
    ) -> Accepted:
        """The job an ``intake_accept`` row names, or the refusal it stands for.

        A known key's row is the original receipt for the same request (a replay is
        never refused by admission: that work is already accepted).

        Raises:
            IdempotencyConflict: a known key with a different request.
            AdmissionRejected: capacity (503) or a quota (429).
        """
        outcome = row["outcome"]
        if outcome == "accepted":
            return accepted_from_row(row, created=True)
        if outcome == "known_key":
            return replay_of(row, request_hash_of(req))
        raise self.refusal(row, demand, capacity)

    def refusal(
        self, row: asyncpg.Record, demand: Demand, capacity: AdmissionRejected | None
    ) -> AdmissionRejected:
        """The refusal an ``intake_accept`` row whose outcome is ``capacity`` or a
        quota stands for (``capacity``: the verdict :meth:`check` read).

        Raises:
            ValueError: the row's outcome is not a refusal (accepted, a known key, a
                key no longer active): the caller answers those itself.
        """
        outcome = row["outcome"]
        if outcome == "capacity" and capacity is not None:
            return capacity
        return self.quota_refusal(outcome, row, demand)

    # ------------------------------------------------------------ system level
    async def capacity_refusal(self, conn: asyncpg.Connection) -> AdmissionRejected | None:
        """The 503 :class:`AdmissionRejected` to answer when the system backlog is over
        its bounds, else None.

        ``conn`` is the caller's connection (used only when the cached reading is
        stale), so a check never waits for a second pooled connection. The caller
        hands the verdict to the accept statement, which answers a replay anyway.
        """
        reading = await self._capacity(conn)
        s = self.settings
        if reading.runnable > s.max_runnable_backlog:
            return AdmissionRejected(
                f"runnable backlog {reading.runnable} is above {s.max_runnable_backlog}",
                status=503,
                reason="capacity_backlog",
                retry_after=s.capacity_retry_after_seconds,
            )
        if reading.oldest_runnable_age_seconds > s.max_oldest_runnable_age_seconds:
            return AdmissionRejected(
                f"oldest eligible job waited {reading.oldest_runnable_age_seconds:.0f}s, "
                f"above {s.max_oldest_runnable_age_seconds:.0f}s",
                status=503,
                reason="capacity_oldest_age",
                retry_after=s.capacity_retry_after_seconds,
            )
        return None

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
    def quota_refusal(self, reason: str, row: asyncpg.Record, demand: Demand) -> AdmissionRejected:
        """The 429 :class:`AdmissionRejected` for the quota ``reason`` the accept
        statement refused with; ``row`` holds the figures it decided on."""
        retry = self.settings.quota_retry_after_seconds
        if reason == "quota_spend_budget":
            would_be = Decimal(row["spent"]) + demand.cost
            return AdmissionRejected(
                f"spend {would_be} would exceed the "
                f"{self.settings.spend_period}ly budget of {Decimal(row['spend_budget'])}",
                status=429,
                reason=reason,
                # The budget frees up when the period turns over, not before.
                retry_after=max(retry, float(row["seconds_to_next_period"])),
            )
        pending: dict[str, tuple[str, int, str]] = {
            "quota_pending_jobs": ("pending jobs", row["jobs"] + 1, "max_pending_jobs"),
            "quota_pending_bytes": (
                "pending bytes",
                row["bytes"] + demand.byte_size,
                "max_pending_bytes",
            ),
            "quota_pending_tokens": (
                "pending estimated tokens",
                row["tokens"] + demand.tokens,
                "max_pending_tokens",
            ),
        }
        if reason not in pending:
            raise ValueError(f"not a quota refusal: {reason!r}")
        what, used, limit = pending[reason]
        return AdmissionRejected(
            f"{what} would be {used}, above the tenant's limit of {row[limit]}",
            status=429,
            reason=reason,
            retry_after=retry,
        )
