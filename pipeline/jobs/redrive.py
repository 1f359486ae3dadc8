"""Operator re-drive of FAILED_TERMINAL jobs: a fresh attempt budget, the same job id.

After a provider outage exhausts a job's attempts it fails terminally, and a
resubmission would make a new job id (the ERP deduplicates by job, so the same
invoice could be posted twice). Re-drive instead moves the failed job back to
READY under its own id. Invariants:

* **Tenant-scoped**: every read and the write name the tenant; another tenant's
  job is :class:`NotFound`, never re-driven.
* **Conditional**: the state change requires ``state = 'FAILED_TERMINAL'`` and the
  ``state_version`` the lock saw (``job_redrive_if_failed``); zero rows refuses.
* **Refused** when the job already has a delivery (its result may be in the ERP)
  or a stored result (a reviewer rejected it: a human decision, not a failure).
* **Audited**: who, why, the attempts and budget before, the terminal reason
  and error class, in ``job_redrives``, in the transaction of the state change,
  with a fresh ``extraction.requested.v1`` outbox event (a new event id, so the
  inbox does not discard it) so the broker path picks the job up too.
* The attempt counter never resets (the guard trigger forbids it): the budget
  grows to ``attempt + attempts``, so ``explain`` shows every attempt ever made.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_owned
from pipeline.errors import RedriveRefused
from pipeline.jobs.records import EVENT_REQUESTED
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.spend import estimate_cost, reserve_spend
from pipeline.states import JobState


@dataclass(frozen=True)
class RedriveRequest:
    """What an operator asks for; ``requested_by`` and ``reason`` go to the audit row."""

    requested_by: str
    reason: str
    #: Fresh attempts on top of the ones already made.
    attempts: int = 3
    #: The job's new deadline, from now.
    deadline_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if not self.requested_by.strip():
            raise ValueError("requested_by is required for the audit trail")
        if not self.reason:
            raise ValueError("a reason is required for the audit trail")
        if self.attempts < 1:
            raise ValueError("a re-drive needs at least one fresh attempt")
        if self.deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")


@dataclass(frozen=True)
class Redriven:
    """One committed re-drive."""

    job_id: uuid.UUID
    redrive_id: uuid.UUID
    attempts_before: int
    max_attempts: int
    state_version: int
    deadline_at: datetime
    created_at: datetime


@dataclass(frozen=True)
class RedriveFilter:
    """A selection of one tenant's failed jobs: error class and a failure-time range."""

    tenant_id: uuid.UUID
    error_class: str | None = None
    failed_from: datetime | None = None
    failed_before: datetime | None = None
    limit: int = 100


@dataclass
class RedriveReport:
    """What a filtered re-drive did: the jobs re-driven and, per job, why one was not."""

    redriven: list[Redriven] = field(default_factory=list)
    refused: dict[uuid.UUID, str] = field(default_factory=dict)


async def redrive_job(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: RedriveRequest,
    *,
    clock: Clock | None = None,
    settings: Settings | None = None,
) -> Redriven:
    """Re-drive one of ``tenant_id``'s FAILED_TERMINAL jobs.

    Raises:
        NotFound: no such job for this tenant.
        RedriveRefused: the job has a delivery (``reason='delivered'``, checked first:
            whatever its state, its result may be in the ERP), is not FAILED_TERMINAL
            (``'state'``) or has a stored result (``'has_result'``).

    The job's estimated spend is reserved again (``settings``: price and budget
    period), like an acceptance: a re-drive is new work the tenant pays for.
    """
    now = (clock or DatabaseClock()).now()
    async with pool.acquire() as conn, conn.transaction():
        return await _redrive_locked(conn, tenant_id, job_id, request, now, settings or Settings())


async def redrive_matching(
    pool: asyncpg.Pool,
    selection: RedriveFilter,
    request: RedriveRequest,
    *,
    clock: Clock | None = None,
    settings: Settings | None = None,
) -> RedriveReport:
    """Re-drive every job of the tenant's selection, each in its own transaction.

    A job that cannot be re-driven (it gained a delivery, another operator
    re-drove it first) is listed in ``refused`` with the reason; the others go on.
    """
    clk = clock or DatabaseClock()
    async with pool.acquire() as conn:
        ids = [
            r["id"]
            for r in await conn.fetch(
                q("job_select_redrivable"),
                selection.tenant_id,
                selection.error_class,
                selection.failed_from,
                selection.failed_before,
                selection.limit,
            )
        ]
    report = RedriveReport()
    for job_id in ids:
        try:
            report.redriven.append(
                await redrive_job(
                    pool, selection.tenant_id, job_id, request, clock=clk, settings=settings
                )
            )
        except RedriveRefused as exc:
            report.refused[job_id] = exc.reason
    return report


async def redrives_for_job(conn: asyncpg.Connection, job_id: uuid.UUID) -> list[dict[str, Any]]:
    """The audit rows of a job's re-drives, oldest first (``explain``; operator scope)."""
    return [dict(r.items()) for r in await conn.fetch(q("job_redrive_list_for_job"), job_id)]


async def _redrive_locked(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: RedriveRequest,
    now: datetime | None,
    settings: Settings,
) -> Redriven:
    job = await fetch_owned(conn, "job_lock_for_redrive", job_id, tenant_id, "job")
    if job["has_delivery"]:
        raise RedriveRefused(
            f"job {job_id} already has a delivery; its result may be in the ERP",
            reason="delivered",
        )
    if job["state"] != JobState.FAILED_TERMINAL.value:
        raise RedriveRefused(
            f"job {job_id} is {job['state']}; only FAILED_TERMINAL jobs are re-driven",
            reason="state",
        )
    if job["has_result"]:
        raise RedriveRefused(
            f"job {job_id} has a result a reviewer rejected; re-drive does not overturn it",
            reason="has_result",
        )
    row = await conn.fetchrow(
        q("job_redrive_if_failed"),
        job_id,
        tenant_id,
        job["state_version"],
        request.attempts,
        float(request.deadline_seconds),
        now,
    )
    if row is None:  # pragma: no cover - the row is locked and checked above
        raise RedriveRefused(f"job {job_id} changed while re-driving", reason="state")
    await reserve_spend(
        conn,
        tenant_id=tenant_id,
        job_id=job_id,
        amount=estimate_cost(job["estimated_tokens"], settings),
        period=settings.spend_period,
        now=now,
    )
    audit = await conn.fetchrow(
        q("job_redrive_insert"),
        uuid.uuid4(),
        job_id,
        tenant_id,
        request.requested_by,
        request.reason,
        job["attempt"],
        job["max_attempts"],
        row["max_attempts"],
        job["terminal_reason"],
        job["last_error_class"],
        job["state_version"],
        row["state_version"],
        row["deadline_at"],
        now,
    )
    await conn.execute(
        q("outbox_insert"),
        uuid.uuid4(),
        job_id,
        EVENT_REQUESTED,
        {
            "job_id": str(job_id),
            "schema_version": job["schema_version"],
            "v": 1,
            "redrive_of": str(audit["id"]),
        },
        None,  # the event continues the job's own trace (outbox_insert reads it)
    )
    return Redriven(
        job_id=job_id,
        redrive_id=audit["id"],
        attempts_before=job["attempt"],
        max_attempts=row["max_attempts"],
        state_version=row["state_version"],
        deadline_at=row["deadline_at"],
        created_at=audit["created_at"],
    )
