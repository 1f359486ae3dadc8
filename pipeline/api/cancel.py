"""Cancellation over HTTP: ``POST /v1/extraction-jobs/{job_id}/cancel``.

The HTTP face of :mod:`pipeline.jobs.cancellation`, an ``APIRouter`` that
:func:`pipeline.api.app.create_app` includes. Invariants:

* **Tenant-scoped**: the caller's tenant goes into every query; another tenant's
  job is a 404 with the body of a missing one, whatever the key's scopes.
* **Scope**: the tenant's ``jobs`` key (the one that submits) or an ``operator``
  key; a review-only key is 403.
* **Idempotent**: a CANCELLED job answers 200 with its one cancellation again
  (``repeated: true``); a settled job is 409 with a problem document naming its
  state and its deliveries. A cancellation never recalls what was already delivered: the answer
  lists the deliveries it stopped and those already sent.
* The audit row names the API key that asked (``key:<id>``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Request
from pydantic import BaseModel, ConfigDict, Field

from pipeline.api.context import ApiContext, Caller
from pipeline.api.problems import ApiProblem, problem_responses
from pipeline.errors import CancelRefused
from pipeline.jobs import Cancelled, CancelRequest, cancel_job
from pipeline.states import JobState

#: Scopes that may cancel a job of their tenant.
CANCEL_SCOPES = frozenset({"jobs", "operator"})

router = APIRouter(tags=["jobs"])


class CancelIn(BaseModel):
    """Why the job is cancelled (optional; kept in the audit trail)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: Annotated[str | None, Field(max_length=4000, pattern=r"^[^\x00]*$")] = None


class CancelOut(BaseModel):
    job_id: uuid.UUID
    cancellation_id: uuid.UUID
    state: JobState = JobState.CANCELLED
    #: The state the cancellation moved the job out of.
    cancelled_from: JobState
    state_version: int
    requested_by: str
    reason: str | None
    #: Deliveries that had not been sent: they never will be.
    deliveries_cancelled: list[uuid.UUID]
    #: Deliveries already sent or in flight: reported, never recalled.
    deliveries_sent: list[uuid.UUID]
    created_at: datetime
    #: True when the job had been cancelled before this request.
    repeated: bool

    @classmethod
    def of(cls, c: Cancelled) -> CancelOut:
        return cls.model_validate(c, from_attributes=True)


@router.post(
    "/v1/extraction-jobs/{job_id}/cancel",
    summary="Cancel a job that has not settled (READY, RETRY_SCHEDULED or RUNNING)",
    response_model=CancelOut,
    responses=problem_responses(400, 401, 403, 404, 409, 413, 422, 503),
)
async def cancel_one(
    request: Request,
    principal: Caller,
    job_id: uuid.UUID,
    body: Annotated[CancelIn | None, Body()] = None,
) -> CancelOut:
    ctx: ApiContext = request.app.state.fenceline
    # The job is found first, so another tenant's job is 404 whatever the scopes.
    await ctx.services.store.get(principal.tenant_id, job_id)
    if not CANCEL_SCOPES & principal.scopes:
        raise ApiProblem(403, "cancelling jobs needs the jobs scope", reason="scope")
    try:
        done = await cancel_job(
            ctx.services.pool,
            principal.tenant_id,
            job_id,
            CancelRequest(
                requested_by=f"key:{principal.key_id}", reason=body.reason if body else None
            ),
            clock=ctx.clock,
        )
    except CancelRefused as exc:
        raise ApiProblem(
            409,
            str(exc),
            reason="settled",
            job_id=str(job_id),
            state=exc.state,
            deliveries=exc.deliveries,
        ) from None
    return CancelOut.of(done)
