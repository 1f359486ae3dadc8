"""Cancellation of unsettled jobs: READY, RETRY_SCHEDULED or RUNNING → CANCELLED.

A client that no longer wants a job (the invoice was withdrawn, it was sent twice)
cancels it instead of waiting for a result it will throw away. Invariants:

* **Tenant-scoped**: every read and the write name the tenant; another tenant's
  job is :class:`NotFound`, never cancelled.
* **Conditional**: the state change requires the state and ``state_version`` the
  lock saw and a cancellable state (``job_cancel_if_cancellable``); zero rows
  refuses, never passes silently.
* **Fenced**: cancelling RUNNING bumps the fence and closes the running attempt
  (outcome ``cancelled``, uncertain: the provider may still bill the call), so
  the attempt's late result matches no row and is recorded as stale by the
  existing late-result path, never applied.
* **Idempotent**: cancelling a CANCELLED job returns its one cancellation again
  (``repeated=True``); a settled job (SUCCEEDED, REVIEW_REQUIRED, FAILED_TERMINAL)
  is refused with :class:`CancelRefused`.
* **Deliveries**: those not yet sent are abandoned (``final_reason =
  'job_cancelled'``); those in flight or delivered are reported, never recalled.
* **Audited**: who, why and when in ``job_cancellations`` (one per job), with an
  ``extraction.cancelled.v1`` outbox event, in the transaction of the state change;
  the job event row carries ``cancelled``, and ``explain`` shows the cancellation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_owned
from pipeline.errors import CancelRefused
from pipeline.jobs.records import EVENT_CANCELLED
from pipeline.queries import q
from pipeline.states import CANCELLABLE, JobState


@dataclass(frozen=True)
class CancelRequest:
    """Who cancels and why; both go to the audit row."""

    requested_by: str
    reason: str | None = None

    def __post_init__(self) -> None:
        if not self.requested_by.strip():
            raise ValueError("requested_by is required for the audit trail")
        if self.reason is not None and len(self.reason) > 4000:
            raise ValueError("reason is at most 4000 characters")


@dataclass(frozen=True)
class Cancelled:
    """One job's cancellation (``repeated``: it had been cancelled before this call)."""

    job_id: uuid.UUID
    cancellation_id: uuid.UUID
    requested_by: str
    reason: str | None
    cancelled_from: JobState
    state_version: int
    fence_before: int
    fence_after: int
    deliveries_cancelled: tuple[uuid.UUID, ...]
    deliveries_sent: tuple[uuid.UUID, ...]
    created_at: datetime
    repeated: bool = False


@dataclass(frozen=True)
class CancelFilter:
    """An operator's selection of one tenant's unsettled jobs: states and age."""

    tenant_id: uuid.UUID
    states: frozenset[JobState] = CANCELLABLE
    created_before: datetime | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        if not self.states or not self.states <= CANCELLABLE:
            raise ValueError(f"states must be a non-empty subset of {sorted(CANCELLABLE)}")
        if self.limit < 1:
            raise ValueError("limit must be positive")


@dataclass
class CancelReport:
    """What a filtered cancellation did (or, dry, would do), and why a job was not."""

    selected: list[uuid.UUID] = field(default_factory=list)
    cancelled: list[Cancelled] = field(default_factory=list)
    refused: dict[uuid.UUID, str] = field(default_factory=dict)


async def cancel_job(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: CancelRequest,
    *,
    clock: Clock | None = None,
) -> Cancelled:
    """Cancel one of ``tenant_id``'s jobs, or return its earlier cancellation.

    Raises:
        NotFound: no such job for this tenant.
        CancelRefused: the job settled before the cancellation reached it.
    """
    now = (clock or DatabaseClock()).now()
    async with pool.acquire() as conn, conn.transaction():
        return await cancel_in_transaction(conn, tenant_id, job_id, request, now)


async def cancel_matching(
    pool: asyncpg.Pool,
    selection: CancelFilter,
    request: CancelRequest,
    *,
    dry_run: bool = False,
    clock: Clock | None = None,
) -> CancelReport:
    """Cancel every job of the selection, each in its own transaction.

    ``dry_run`` only selects. A job that settled between selection and its
    cancellation is listed in ``refused`` with its state; the others go on.
    """
    clk = clock or DatabaseClock()
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            q("job_select_cancellable"),
            selection.tenant_id,
            sorted(s.value for s in selection.states),
            selection.created_before,
            selection.limit,
        )
    report = CancelReport(selected=[r["id"] for r in rows])
    if dry_run:
        return report
    for job_id in report.selected:
        try:
            report.cancelled.append(
                await cancel_job(pool, selection.tenant_id, job_id, request, clock=clk)
            )
        except CancelRefused as exc:
            report.refused[job_id] = exc.state
    return report


async def cancellations_for_job(
    conn: asyncpg.Connection, job_id: uuid.UUID
) -> list[dict[str, Any]]:
    """The job's cancellation audit row, if any (``explain``; operator scope)."""
    return [dict(r.items()) for r in await conn.fetch(q("job_cancellation_list_for_job"), job_id)]


def _cancelled(row: asyncpg.Record, *, repeated: bool) -> Cancelled:
    return Cancelled(
        job_id=row["job_id"],
        cancellation_id=row["id"],
        requested_by=row["requested_by"],
        reason=row["reason"],
        cancelled_from=JobState(row["from_state"]),
        state_version=row["to_state_version"],
        fence_before=row["fence_before"],
        fence_after=row["fence_after"],
        deliveries_cancelled=tuple(row["deliveries_cancelled"]),
        deliveries_sent=tuple(row["deliveries_sent"]),
        created_at=row["created_at"],
        repeated=repeated,
    )


async def cancel_in_transaction(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: CancelRequest,
    now: datetime | None,
) -> Cancelled:
    """:func:`cancel_job` inside the caller's transaction (an erasure fences off a job
    in flight this way before it erases; :mod:`pipeline.jobs.erasure`)."""
    job = await fetch_owned(conn, "job_lock_for_cancel", job_id, tenant_id, "job")
    state = JobState(job["state"])
    if state is JobState.CANCELLED:
        earlier = await conn.fetchrow(q("job_cancellation_get_for_tenant"), job_id, tenant_id)
        if earlier is None:  # pragma: no cover - the audit row shares the state change's tx
            raise CancelRefused(
                f"job {job_id} is CANCELLED without its audit row", state=state.value
            )
        return _cancelled(earlier, repeated=True)
    if state not in CANCELLABLE:
        deliveries = await conn.fetch(q("delivery_list_for_job"), job_id, tenant_id)
        raise CancelRefused(
            f"job {job_id} is {state.value}; only READY, RETRY_SCHEDULED and RUNNING jobs"
            " can be cancelled",
            state=state.value,
            deliveries=[{"id": str(d["id"]), "state": d["state"]} for d in deliveries],
        )
    detail = f"cancelled by {request.requested_by}" + (
        f": {request.reason}" if request.reason else ""
    )
    row = await conn.fetchrow(
        q("job_cancel_if_cancellable"),
        job_id,
        tenant_id,
        state.value,
        job["state_version"],
        detail[:2000],
        now,
    )
    if row is None:  # pragma: no cover - the row is locked and checked above
        raise CancelRefused(f"job {job_id} changed while cancelling", state=state.value)
    if state is JobState.RUNNING:
        closed = await conn.fetchval(
            q("attempt_close_if_running"),
            job_id,
            job["fence"],
            "cancelled",
            "cancelled",
            detail[:2000],
            None,
            None,
            None,
            now,
            True,  # uncertain: the provider call in flight may still be billed
            None,
        )
        if closed is None:  # pragma: no cover - a RUNNING job has its attempt open
            raise CancelRefused(f"job {job_id}: its running attempt was closed", state="RUNNING")
    deliveries = await conn.fetchrow(q("delivery_cancel_unsent_for_job"), job_id, tenant_id)
    audit = await conn.fetchrow(
        q("job_cancellation_insert"),
        uuid.uuid4(),
        job_id,
        tenant_id,
        request.requested_by,
        request.reason,
        state.value,
        job["state_version"],
        row["state_version"],
        job["fence"],
        row["fence"],
        deliveries["cancelled"],
        deliveries["sent"],
        now,
    )
    await conn.execute(
        q("outbox_insert"),
        uuid.uuid4(),
        job_id,
        EVENT_CANCELLED,
        {
            "job_id": str(job_id),
            "state": JobState.CANCELLED.value,
            "state_version": row["state_version"],
            "cancelled_from": state.value,
            "v": 1,
        },
        None,  # the event continues the job's own trace (outbox_insert reads it)
    )
    return _cancelled(audit, repeated=False)
