"""Re-drive over HTTP: ``POST /v1/extraction-jobs/{job_id}/redrive`` and ``POST /v1/redrives``.

The HTTP face of :mod:`pipeline.jobs.redrive`, an ``APIRouter`` that
:func:`pipeline.api.app.create_app` includes. Invariants:

* **Operator scope**: without it the answer is 403 before any lookup, so it says
  nothing about which ids exist.
* **Tenant-scoped**: the caller's tenant goes into every query; another tenant's
  job is a 404 with the body of a missing one (the cross-tenant matrix of
  ``tests/integration/test_api_tenancy.py`` covers these routes).
* **Refusals are 409** with a reason (``state``, ``delivered``, ``has_result``):
  a delivered job's result may already be in the ERP, so it is never run again.
* The audit row names the API key that asked (``key:<id>``) and its reason.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from pipeline.api.context import ApiContext, Caller
from pipeline.api.problems import (
    UNSAFE_NOTE_NOTE,
    ApiProblem,
    problem_responses,
    refuse_unsafe_text,
    safe_text_schema,
)
from pipeline.api.submission import JsonInt
from pipeline.clock import parse_instant
from pipeline.errors import RedriveRefused
from pipeline.jobs import (
    RedriveFilter,
    Redriven,
    RedriveRequest,
    redrive_job,
    redrive_matching,
)
from pipeline.tenants import Principal

_TEXT = r"^[^\x00]*$"


def _rfc3339(value: Any) -> Any:
    """A JSON date-time is a string with an offset; numbers, naive times and instants
    outside the calendar in UTC are refused."""
    if isinstance(value, datetime):
        return value
    return parse_instant(value)


#: An RFC 3339 date-time in strict-mode JSON (pydantic's strict mode refuses strings).
Rfc3339 = Annotated[
    datetime, BeforeValidator(_rfc3339), WithJsonSchema({"type": "string", "format": "date-time"})
]

router = APIRouter(tags=["re-drive"])


class RedriveIn(BaseModel):
    """Why the job is run again, and how many fresh attempts it gets."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4000,
            pattern=_TEXT,
            description=f"Kept in the audit row. {UNSAFE_NOTE_NOTE}",
            json_schema_extra=safe_text_schema(multiline=True),
        ),
    ]
    attempts: JsonInt = Field(
        0, ge=0, le=20, description="Fresh attempts; 0 takes the configured default."
    )


class RedriveSelectionIn(RedriveIn):
    """A selection of this tenant's FAILED_TERMINAL jobs to re-drive."""

    error_class: Annotated[str | None, Field(max_length=100, pattern=r"^[a-z0-9_]+$")] = None
    failed_from: Rfc3339 | None = None
    failed_before: Rfc3339 | None = None
    limit: JsonInt = Field(100, ge=1, le=1000)


class RedriveOut(BaseModel):
    redrive_id: uuid.UUID
    job_id: uuid.UUID
    attempts_before: int
    max_attempts: int
    state_version: int
    deadline_at: datetime
    created_at: datetime

    @classmethod
    def of(cls, r: Redriven) -> RedriveOut:
        return cls.model_validate(r, from_attributes=True)


class RedriveReportOut(BaseModel):
    redriven: list[RedriveOut]
    #: Job id → why it was not re-driven.
    refused: dict[uuid.UUID, str]


def _operator(principal: Principal) -> None:
    if not principal.is_operator:
        raise ApiProblem(403, "re-driving jobs needs the operator scope", reason="scope")


def _request(ctx: ApiContext, principal: Principal, body: RedriveIn) -> RedriveRequest:
    s = ctx.settings
    refuse_unsafe_text("reason", body.reason, multiline=True)
    return RedriveRequest(
        requested_by=f"key:{principal.key_id}",
        reason=body.reason,
        attempts=body.attempts or s.redrive_attempts,
        deadline_seconds=s.default_deadline_seconds,
    )


@router.post(
    "/v1/extraction-jobs/{job_id}/redrive",
    summary="Run a FAILED_TERMINAL job again under the same id with a fresh attempt budget",
    response_model=RedriveOut,
    responses=problem_responses(400, 401, 403, 404, 409, 413, 422, 503),
)
async def redrive_one(
    request: Request, principal: Caller, job_id: uuid.UUID, body: RedriveIn
) -> RedriveOut:
    _operator(principal)
    ctx: ApiContext = request.app.state.fenceline
    try:
        done = await redrive_job(
            ctx.services.pool,
            principal.tenant_id,
            job_id,
            _request(ctx, principal, body),
            clock=ctx.clock,
            settings=ctx.settings,
        )
    except RedriveRefused as exc:
        raise ApiProblem(409, str(exc), reason=exc.reason, job_id=str(job_id)) from None
    return RedriveOut.of(done)


@router.post(
    "/v1/redrives",
    summary="Re-drive this tenant's FAILED_TERMINAL jobs by error class and failure time",
    response_model=RedriveReportOut,
    responses=problem_responses(400, 401, 403, 413, 422, 503),
)
async def redrive_selection(
    request: Request, principal: Caller, body: RedriveSelectionIn
) -> RedriveReportOut:
    _operator(principal)
    ctx: ApiContext = request.app.state.fenceline
    report = await redrive_matching(
        ctx.services.pool,
        RedriveFilter(
            tenant_id=principal.tenant_id,
            error_class=body.error_class,
            failed_from=body.failed_from,
            failed_before=body.failed_before,
            limit=body.limit,
        ),
        _request(ctx, principal, body),
        clock=ctx.clock,
        settings=ctx.settings,
    )
    return RedriveReportOut(
        redriven=[RedriveOut.of(r) for r in report.redriven], refused=report.refused
    )
