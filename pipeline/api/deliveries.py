"""The tenant's delivery log over HTTP: ``/v1/deliveries`` (list, read, resend).

The HTTP face of :class:`pipeline.delivery.DeliveryLog`. Invariants:

* **Tenant-scoped**: every read and the resend take the caller's tenant; another
  tenant's delivery is a 404 with the body of a missing one (the cross-tenant matrix,
  ``tests/integration/test_api_tenancy.py``, covers these routes).
* **Scopes**: any key of the tenant reads its deliveries (as it reads its jobs and
  endpoints); a resend needs ``operator`` (403 before any lookup).
* **What an attempt shows**: number, start and end, outcome, HTTP status, latency,
  error class, and its signature: the ``webhook-id`` (the delivery id, the same on
  every attempt), the signed ``webhook-timestamp`` and the ids of the keys that
  signed. Never the body, an error text or the address a host resolved to (the
  API is no oracle for internal DNS).
* **Keyset pages**, newest first over ``(created_at, id)``: an opaque cursor that only
  positions within the caller's own deliveries.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from pipeline.api.context import ApiContext, Caller
from pipeline.api.job_views import decode_cursor, encode_cursor
from pipeline.api.problems import ApiProblem, problem_responses
from pipeline.delivery import DeliveryLog, DeliveryState, LogFilter, LogPosition
from pipeline.errors import DeliveryRefused
from pipeline.tenants import Principal

PREFIX = "/v1/deliveries"

DeliveryStateName = Literal[
    "pending", "in_flight", "delivered", "retry_scheduled", "failed", "abandoned"
]


class DeliveryOut(BaseModel):
    """One delivery of the tenant's log."""

    id: uuid.UUID = Field(description="The delivery id: the `webhook-id` of every attempt.")
    job_id: uuid.UUID
    endpoint_id: uuid.UUID
    event_type: str
    state: DeliveryStateName
    attempts: int = Field(description="Attempts so far (a resend adds one).")
    last_status: int | None = Field(description="The last attempt's HTTP status.")
    last_latency_ms: float | None
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None = Field(
        description="When it is tried next (pending and retry_scheduled only)."
    )
    final_reason: str | None = Field(description="Why it was given up (failed, abandoned).")
    body_sha256: str = Field(
        description="SHA-256 of the body as stored (a sealed IBAN in it is opened only"
        " when sent; every attempt sends the same bytes)."
    )
    body_available: bool = Field(
        description="False once erasure or retention removed the body: it cannot be resent."
    )
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> DeliveryOut:
        waiting = row["state"] in (DeliveryState.PENDING, DeliveryState.RETRY_SCHEDULED)
        return cls.model_validate(
            {**row, "next_attempt_at": row["next_attempt_at"] if waiting else None}
        )


class AttemptOut(BaseModel):
    """One attempt: a signed POST of the delivery's body under one fence."""

    attempt: int = Field(description="1 for the first attempt, counting resends.")
    started_at: datetime
    finished_at: datetime | None
    outcome: Literal[
        "running", "delivered", "retry_scheduled", "failed", "abandoned", "lease_expired"
    ]
    http_status: int | None
    latency_ms: float | None
    error_class: str | None = Field(
        description="`http_<status>`, `timeout`, `transport`, `egress_blocked`, `redirect`, "
        "`auth`, `gone`, `signing`, `lease_expired`, … (None when delivered)."
    )
    webhook_id: uuid.UUID = Field(description="The `webhook-id` header: the delivery id.")
    webhook_timestamp: int | None = Field(
        description="The `webhook-timestamp` this attempt was signed with."
    )
    signature_key_ids: list[str] = Field(
        description="The endpoint keys whose `v1` signatures it carried (two in a rotation)."
    )
    next_attempt_at: datetime | None = Field(description="The retry this attempt scheduled.")

    @classmethod
    def of(cls, row: dict[str, Any]) -> AttemptOut:
        return cls(
            attempt=row["attempt"],
            started_at=row["started_at"],
            finished_at=row["ended_at"],
            outcome=row["outcome"],
            http_status=row["http_status"],
            latency_ms=row["latency_ms"],
            error_class=row["error_class"],
            webhook_id=row["delivery_id"],
            webhook_timestamp=row["signed_timestamp"],
            signature_key_ids=list(row["key_ids"] or ()),
            next_attempt_at=row["next_attempt_at"],
        )


class DeliveryDetail(DeliveryOut):
    """A delivery with every attempt, oldest first."""

    attempt_log: list[AttemptOut]
    resendable: bool = Field(description="Whether `POST …/resend` would be taken now.")

    @classmethod
    def of_detail(cls, row: dict[str, Any]) -> DeliveryDetail:
        return cls(
            **DeliveryOut.of(row).model_dump(),
            attempt_log=[AttemptOut.of(a) for a in row["attempt_log"]],
            resendable=row["resend_refusal"] is None,
        )


class DeliveryPage(BaseModel):
    items: list[DeliveryOut]
    next_cursor: str | None


def delivery_log(request: Request) -> DeliveryLog:
    ctx: ApiContext = request.app.state.fenceline
    return DeliveryLog(ctx.services.pool, clock=ctx.clock)


def refused(exc: DeliveryRefused) -> ApiProblem:
    """409 for a state that may change (in flight, disabled, not verified); 410 when the
    body is gone for good."""
    status = 410 if exc.reason in ("body_erased", "body_removed") else 409
    return ApiProblem(status, str(exc), reason=exc.reason, state=exc.state)


def _operator(principal: Principal) -> None:
    if not principal.is_operator:
        raise ApiProblem(403, "resending a delivery needs the operator scope", reason="scope")


router = APIRouter(prefix=PREFIX, tags=["deliveries"])


@router.get(
    "",
    summary="This tenant's deliveries, newest first (keyset pages)",
    response_model=DeliveryPage,
    responses=problem_responses(400, 401, 422, 503),
)
async def list_deliveries(
    request: Request,
    principal: Caller,
    job_id: uuid.UUID | None = None,
    endpoint_id: uuid.UUID | None = None,
    state: DeliveryStateName | None = None,
    cursor: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{1,400}$")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> DeliveryPage:
    after = LogPosition(*decode_cursor(cursor)) if cursor else None
    ctx: ApiContext = request.app.state.fenceline
    size = max(1, min(limit, ctx.settings.page_size_max))
    rows, nxt = await delivery_log(request).page(
        principal.tenant_id, LogFilter(job_id, endpoint_id, state), after=after, limit=size
    )
    return DeliveryPage(
        items=[DeliveryOut.of(r) for r in rows],
        next_cursor=encode_cursor(nxt.created_at, nxt.id) if nxt else None,
    )


@router.get(
    "/{delivery_id}",
    summary="One delivery with every attempt (status, latency, error class, signature)",
    response_model=DeliveryDetail,
    responses=problem_responses(401, 404, 422, 503),
)
async def get_delivery(
    request: Request, principal: Caller, delivery_id: uuid.UUID
) -> DeliveryDetail:
    return DeliveryDetail.of_detail(
        await delivery_log(request).get(principal.tenant_id, delivery_id)
    )


@router.post(
    "/{delivery_id}/resend",
    summary="Send a delivery again: a new attempt under the same delivery id",
    status_code=202,
    response_model=DeliveryDetail,
    responses={
        202: {"description": "Queued: the dispatcher sends it again under the same webhook-id"},
        **problem_responses(401, 403, 404, 409, 410, 422, 503),
    },
)
async def resend_delivery(
    request: Request, principal: Caller, delivery_id: uuid.UUID
) -> DeliveryDetail:
    """The same delivery id and body bytes, re-signed: the receiver deduplicates on the
    `webhook-id`, so the ERP posts nothing twice. 409 `in_flight` (an attempt is
    running), `job_cancelled`, `endpoint_disabled`; 410 `body_erased` /
    `body_removed` (erasure or retention removed the body). A waiting delivery is
    brought forward; resending it again before it is sent adds no attempt."""
    _operator(principal)
    try:
        row = await delivery_log(request).resend(
            principal.tenant_id, delivery_id, requested_by=f"key:{principal.key_id}"
        )
    except DeliveryRefused as exc:
        raise refused(exc) from None
    return DeliveryDetail.of_detail(row)
