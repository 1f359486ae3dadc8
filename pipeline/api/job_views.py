"""What the API shows of a job: tenant-scoped reads and their response models.

Every query here takes the caller's tenant id, so a job of another tenant reads
exactly like a missing one (:class:`~pipeline.errors.NotFound`, 404): an
unguessable UUID is not authorisation. The owner sees the authoritative state,
its ``state_version`` and an attempts summary; the operational retry details
(fence, lease, next retry time, error texts, per-attempt usage) are added only
for keys with the ``operator`` scope (spec section 5).

List pages use a keyset cursor over ``(created_at, id)``, newest first, so a
page never skips or repeats a job while new jobs arrive. The cursor is opaque
to clients (URL-safe base64 of JSON) and carries no tenant: it only positions
within the caller's own jobs.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import BaseModel, JsonValue

from pipeline.api.problems import ApiProblem
from pipeline.clock import parse_instant
from pipeline.data_keys import DataKeys
from pipeline.database import fetch_owned
from pipeline.queries import q
from pipeline.sealed_results import open_result, open_validation
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Principal


class AttemptsSummary(BaseModel):
    count: int
    max_attempts: int


class AttemptDetail(BaseModel):
    attempt: int
    fence: int
    worker_id: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str
    error_class: str | None
    error_detail: str | None
    engine: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    uncertain: bool
    late_result_at: datetime | None


class OperationalDetails(BaseModel):
    """Retry and lease internals, for operator-scope keys only."""

    fence: int
    lease_until: datetime | None
    lease_owner: str | None
    available_at: datetime
    last_error_class: str | None
    last_error: str | None
    attempts: list[AttemptDetail]


class JobStatus(BaseModel):
    job_id: uuid.UUID
    state: JobState
    state_version: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    deadline_at: datetime
    schema_version: int
    model_policy: str
    object_version: str
    validation_policy: str | None
    attempts: AttemptsSummary
    terminal_reason: str | None
    review_reasons: str | None
    status_url: str
    events_url: str
    result_url: str | None
    operational: OperationalDetails | None = None


class JobSummary(BaseModel):
    job_id: uuid.UUID
    state: JobState
    state_version: int
    attempts: AttemptsSummary
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    terminal_reason: str | None
    status_url: str


class JobPage(BaseModel):
    items: list[JobSummary]
    next_cursor: str | None


class JobResult(BaseModel):
    job_id: uuid.UUID
    state: JobState
    decision: JobState
    result: dict[str, JsonValue]
    validation: dict[str, JsonValue]
    created_at: datetime


def _url(job_id: uuid.UUID) -> str:
    return f"/v1/extraction-jobs/{job_id}"


def _job_columns(job: asyncpg.Record) -> dict[str, Any]:
    """A job row as the views read it: its columns under their own names (each view
    takes the ones it has fields for; pydantic ignores the rest and refuses a missing
    one), plus ``id`` as ``job_id``, the attempt counters and the job's URL."""
    return {
        **job,
        "job_id": job["id"],
        "attempts": AttemptsSummary(count=job["attempt"], max_attempts=job["max_attempts"]),
        "status_url": _url(job["id"]),
    }


def encode_cursor(created_at: datetime, job_id: uuid.UUID) -> str:
    raw = json.dumps([created_at.isoformat(), str(job_id)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) position of ``cursor``; 400 for anything we did not issue."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, job = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        return parse_instant(created), uuid.UUID(job)
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        raise ApiProblem(400, "the cursor is not valid", reason="invalid_cursor") from None


class JobViews:
    """Tenant-scoped reads behind the GET routes."""

    def __init__(
        self, pool: asyncpg.Pool, settings: Settings, *, keys: DataKeys | None = None
    ) -> None:
        self.pool = pool
        self.settings = settings
        #: Open the result's sealed values (pipeline/sealed_results.py).
        self.keys = keys if keys is not None else DataKeys.from_settings(settings)

    def _acquire(self) -> Any:
        return self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds)

    async def status(self, principal: Principal, job_id: uuid.UUID) -> JobStatus:
        async with self._acquire() as conn:
            job = await fetch_owned(conn, "job_get_for_tenant", job_id, principal.tenant_id, "job")
            attempts = await conn.fetch(
                q("attempt_list_for_tenant_job"), job_id, principal.tenant_id
            )
        state = JobState(job["state"])
        operational = None
        if principal.is_operator:
            operational = OperationalDetails.model_validate(
                {**job, "attempts": [AttemptDetail.model_validate(dict(a)) for a in attempts]}
            )
        return JobStatus.model_validate(
            {
                **_job_columns(job),
                "review_reasons": job["last_error"] if state is JobState.REVIEW_REQUIRED else None,
                "events_url": _url(job["id"]) + "/events",
                "result_url": _url(job["id"]) + "/result" if job["result_ref"] else None,
                "operational": operational,
            }
        )

    async def result(self, principal: Principal, job_id: uuid.UUID) -> JobResult:
        async with self._acquire() as conn:
            job = await fetch_owned(conn, "job_get_for_tenant", job_id, principal.tenant_id, "job")
            row = await conn.fetchrow(q("result_get_for_tenant"), job_id, principal.tenant_id)
            removed = await conn.fetchrow(
                q("retention_mark_get_for_job"), job_id, principal.tenant_id
            )
            opened = None
            if row is not None and removed is None:
                # the result's text is sealed at rest; a shredded data key answers 410
                # content_shredded (pipeline/api/problems.py)
                opened = {
                    **row,
                    "result": await open_result(
                        self.keys, conn, principal.tenant_id, job_id, row["result"]
                    ),
                    "validation": await open_validation(
                        self.keys, conn, principal.tenant_id, job_id, row["validation"]
                    ),
                }
        if removed is not None:
            raise ApiProblem(
                410,
                f"the result's content was removed by retention at "
                f"{removed['content_removed_at'].isoformat()}",
                reason="content_removed",
                job_id=str(job_id),
                state=job["state"],
                state_version=job["state_version"],
            )
        if opened is None:
            raise ApiProblem(
                409,
                f"the job is {job['state']} and has no result",
                reason="result_not_available",
                job_id=str(job_id),
                state=job["state"],
                state_version=job["state_version"],
            )
        return JobResult.model_validate({**opened, "job_id": job_id, "state": job["state"]})

    async def page(
        self,
        principal: Principal,
        *,
        state: JobState | None,
        cursor: str | None,
        limit: int,
    ) -> JobPage:
        after_at, after_id = decode_cursor(cursor) if cursor else (None, None)
        size = max(1, min(limit, self.settings.page_size_max))
        async with self._acquire() as conn:
            rows = await conn.fetch(
                q("job_list_page_for_tenant"),
                principal.tenant_id,
                state.value if state else None,
                after_at,
                after_id,
                size + 1,
            )
        more = len(rows) > size
        rows = rows[:size]
        items = [JobSummary.model_validate(_job_columns(r)) for r in rows]
        last = rows[-1] if rows else None
        next_cursor = encode_cursor(last["created_at"], last["id"]) if more and last else None
        return JobPage(items=items, next_cursor=next_cursor)

    async def visible(self, principal: Principal, job_id: uuid.UUID) -> None:
        """Raise :class:`NotFound` unless the principal's tenant owns ``job_id``."""
        async with self._acquire() as conn:
            await fetch_owned(conn, "job_get_for_tenant", job_id, principal.tenant_id, "job")
