"""Erasure over HTTP: ``DELETE /v1/extraction-jobs/{job_id}/content`` (one job) and
``POST /v1/tenant-erasures`` (every job of the caller's tenant).

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
* The tombstone names the API key that asked (``key:<id>``).
* **A tenant-wide erasure** is an ``operator`` key's only (a ``jobs`` key is 403), of
  its own tenant, which the body must name again (``confirm_tenant``: another id is
  403 and erases nothing). One call erases at most ``max_jobs`` jobs, oldest first, and says
  how many are left; the caller calls again until ``complete`` (each job's erasure
  is idempotent, so a call cut off midway is simply repeated). The call that finds
  no job left shreds the tenant's data keys (``keys_shredded``). ``fenceline erase
  --tenant`` runs the same pass to the end from the command line.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from pipeline.api.context import ApiContext, Caller
from pipeline.api.problems import ApiProblem, problem_responses
from pipeline.jobs import Erased, EraseRequest, erasable_jobs, erase_job, erase_tenant
from pipeline.states import JobState

#: Scopes that may erase a job of their tenant.
ERASE_SCOPES = frozenset({"jobs", "operator"})
#: The scope that may erase a whole tenant.
TENANT_ERASE_SCOPE = "operator"
#: Jobs one tenant-wide call erases at most, by default and at most.
TENANT_ERASE_DEFAULT_JOBS = 200
TENANT_ERASE_MAX_JOBS = 1000

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


class TenantErasureIn(BaseModel):
    #: The caller's own tenant, named again: any other id is refused, nothing erased.
    confirm_tenant: uuid.UUID
    reason: str | None = Field(None, max_length=500)
    #: Jobs this call erases at most (oldest first); call again until ``complete``.
    max_jobs: int = Field(TENANT_ERASE_DEFAULT_JOBS, ge=1, le=TENANT_ERASE_MAX_JOBS)


class TenantErasureOut(BaseModel):
    tenant_id: uuid.UUID
    #: The jobs this call erased, oldest first (their tombstones: ``GET``/``DELETE``
    #: of a job's content answers them again).
    erased: list[uuid.UUID]
    #: Of those, jobs that had not settled and were cancelled first.
    cancelled_first: list[uuid.UUID]
    #: Jobs of the tenant not erased yet, after this call.
    remaining: int
    #: The tenant's data key versions this call destroyed (crypto-shredding, once no
    #: job is left): content sealed under them, wherever a copy survives, is unreadable.
    keys_shredded: list[int] = []
    #: True when no job of the tenant is left to erase.
    complete: bool


@router.post(
    "/v1/tenant-erasures",
    summary="Erase the content of the caller's tenant's jobs, a bounded batch per call",
    response_model=TenantErasureOut,
    responses=problem_responses(400, 401, 403, 422, 503),
)
async def erase_own_tenant(
    request: Request, principal: Caller, body: TenantErasureIn
) -> TenantErasureOut:
    ctx: ApiContext = request.app.state.fenceline
    if TENANT_ERASE_SCOPE not in principal.scopes:
        raise ApiProblem(403, "a tenant-wide erasure needs the operator scope", reason="scope")
    if body.confirm_tenant != principal.tenant_id:
        raise ApiProblem(
            403,
            "an operator key erases its own tenant only: confirm_tenant must name it",
            reason="tenant_not_confirmed",
        )
    report = await erase_tenant(
        ctx.services.pool,
        principal.tenant_id,
        EraseRequest(requested_by=f"key:{principal.key_id}", reason=body.reason),
        ctx.services.documents,
        batch=min(body.max_jobs, 100),
        limit=body.max_jobs,
        clock=ctx.clock,
    )
    async with ctx.services.pool.acquire() as conn:
        remaining = await erasable_jobs(conn, principal.tenant_id)
    return TenantErasureOut(
        tenant_id=principal.tenant_id,
        erased=[e.job_id for e in report.erased],
        cancelled_first=[e.job_id for e in report.erased if e.cancelled_first],
        remaining=remaining,
        complete=remaining == 0,
        keys_shredded=report.keys_shredded,
    )
