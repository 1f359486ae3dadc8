"""Erasure over HTTP: ``DELETE /v1/extraction-jobs/{job_id}/content``.

The HTTP face of :mod:`pipeline.jobs.erasure`, an ``APIRouter`` that
:func:`pipeline.api.app.create_app` includes. Invariants:

* **Tenant-scoped**: the caller's tenant goes into every query; another tenant's
  job is a 404 with the body of a missing one, whatever the key's scopes.
* **Scope**: the tenant's ``jobs`` key or an ``operator`` key; a review-only key is 403.
* **Fenced first**: a job not settled is cancelled (the cancellation path, audited as
  a cancellation) and then erased in the same transaction; the answer says so
  (``cancelled_first``).
* **Idempotent**: erasing again answers 200 with the same tombstone
  (``repeated: true``). A delivery already sent is listed, never recalled.
* The tombstone names the API key that asked (``key:<id>``). A tenant-wide erasure is
  the operator's command (``fenceline erase --tenant``).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Request
from pydantic import BaseModel

from pipeline.api.context import ApiContext, Caller
from pipeline.api.problems import ApiProblem, problem_responses
from pipeline.jobs import Erased, EraseRequest, erase_job
from pipeline.states import JobState

#: Scopes that may erase a job of their tenant.
ERASE_SCOPES = frozenset({"jobs", "operator"})

router = APIRouter(tags=["jobs"])


class ErasureOut(BaseModel):
    job_id: uuid.UUID
    erasure_id: uuid.UUID
    requested_by: str
    #: The job's state when its content was erased (CANCELLED if it was cancelled first).
    job_state: JobState
    #: True when the job had not settled and was cancelled before the erasure.
    cancelled_first: bool
    #: The digest of the document's bytes, kept for the audit trail.
    document_sha256: str | None
    #: False when another job of the tenant still refers to the same document.
    document_erased: bool
    #: The digest of the extracted result as it was, kept for the audit trail.
    result_sha256: str | None
    #: removed, pending (retried by erasing again), shared (another document names
    #: the same stored object) or client_object (the client's own object: not removed).
    object_outcome: str | None
    object_removed_at: datetime | None
    #: Deliveries that had not been sent: they never will be.
    deliveries_abandoned: list[uuid.UUID]
    #: Deliveries already sent or in flight: the receiver's copy is not recalled.
    deliveries_sent: list[uuid.UUID]
    #: Rows erased or blanked, by table.
    rows: dict[str, int]
    created_at: datetime
    #: True when the job had been erased before this request.
    repeated: bool

    @classmethod
    def of(cls, e: Erased) -> ErasureOut:
        return cls.model_validate(e, from_attributes=True)


@router.delete(
    "/v1/extraction-jobs/{job_id}/content",
    summary="Erase a job's document, text, values and delivered bodies; keep the audit trail",
    response_model=ErasureOut,
    responses=problem_responses(400, 401, 403, 404, 422, 503),
)
async def erase_one(request: Request, principal: Caller, job_id: uuid.UUID) -> ErasureOut:
    ctx: ApiContext = request.app.state.fenceline
    # The job is found first, so another tenant's job is 404 whatever the scopes.
    await ctx.services.store.get(principal.tenant_id, job_id)
    if not ERASE_SCOPES & principal.scopes:
        raise ApiProblem(403, "erasing a job's content needs the jobs scope", reason="scope")
    done = await erase_job(
        ctx.services.pool,
        principal.tenant_id,
        job_id,
        EraseRequest(requested_by=f"key:{principal.key_id}"),
        ctx.services.documents,
        clock=ctx.clock,
    )
    return ErasureOut.of(done)
