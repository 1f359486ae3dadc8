"""Webhook endpoints over HTTP: ``/v1/webhook-endpoints`` (register, read, change, verify,
test, rotate, disable, enable).

The HTTP face of :class:`pipeline.delivery.endpoints.EndpointRegistry`, an ``APIRouter``
that :func:`pipeline.api.app.create_app` includes. Invariants:

* **Tenant-scoped** like the job routes: every registry call takes the caller's
  tenant, and another tenant's endpoint is a 404 with the body of a missing one.
  The cross-tenant matrix (``tests/integration/test_api_tenancy.py``) is built
  from the app's route table, so it covers these routes too.
* **Scopes**: any key of the tenant may read its endpoints (as it may read its
  jobs). Deciding where results go and issuing secrets — register, rotate,
  disable, enable — needs the ``operator`` scope; without it the answer is 403
  before any lookup, so it says nothing about which ids exist.
* **Secrets are shown once**: only the 201 of a registration and the 200 of a
  rotation carry one, each its own new secret; no read returns a secret (the
  response models have no field for it) and the database keeps them sealed.
* **Verified before delivering**: a new endpoint, and one whose URL changed, is
  ``pending`` until it echoes a challenge (:mod:`pipeline.delivery.verification`);
  the dispatcher sends it, ``POST …/verify`` sends one at once.
* **Test events**: ``POST …/test`` sends a signed ``endpoint.test.v1``
  (:mod:`pipeline.delivery.probe`) through the same egress client, to an active,
  verified endpoint only; it is no delivery and never an ERP posting.
* **SSRF**: a URL the egress guard refuses (at registration, a URL change, or when re-enabling)
  is a 422 problem with reason ``egress_blocked`` and nothing is written. The
  detail names the guard's rule, never the addresses a host resolved to, so the
  API is no oracle for internal DNS.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from pipeline.api.context import ApiContext, Caller
from pipeline.api.problems import (
    UNSAFE_TEXT_NOTE,
    ApiProblem,
    problem_responses,
    refuse_unsafe_text,
    safe_text_schema,
)
from pipeline.api.submission import JsonInt
from pipeline.delivery import (
    DEFAULT_EVENT_TYPES,
    EVENT_TYPE_PATTERN,
    MAX_ACK_WINDOW_SECONDS,
    MAX_EVENT_TYPES,
    MIN_ACK_WINDOW_SECONDS,
    EgressClient,
    Endpoint,
    EndpointChallenger,
    EndpointProbe,
    EndpointRegistry,
    IssuedSecret,
    SecretBox,
    guard_from_settings,
)
from pipeline.errors import DeliveryRefused, EgressBlocked
from pipeline.tenants import Principal

PREFIX = "/v1/webhook-endpoints"

EventType = Annotated[str, Field(pattern=EVENT_TYPE_PATTERN, max_length=100)]
AckWindow = Annotated[JsonInt, Field(ge=MIN_ACK_WINDOW_SECONDS, le=MAX_ACK_WINDOW_SECONDS)]
_ACK_WINDOW_NOTE = (
    "Seconds within which the ERP must acknowledge each delivery it answered 2xx "
    "(`POST /v1/deliveries/{id}/acknowledgement`); a delivery without one by then is "
    "`overdue` and alerts once. `null`: no acknowledgement expected (the default)."
)
_TEXT = r"^[^\x00]*$"


class EndpointCreate(BaseModel):
    """A webhook endpoint to register; its URL is checked (and resolved) first."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="`https` on an allowed port, every resolved address global "
        "(see docs/delivery.md, SSRF policy).",
    )
    event_types: list[EventType] | None = Field(
        None,
        max_length=MAX_EVENT_TYPES,
        description=f"Event types delivered here; `[]` means every type. Omitted: "
        f"{list(DEFAULT_EVENT_TYPES)}.",
    )
    description: (
        Annotated[str, Field(max_length=500, pattern=_TEXT, json_schema_extra=safe_text_schema())]
        | None
    ) = Field(None, description=UNSAFE_TEXT_NOTE)
    acknowledgement_window_seconds: AckWindow | None = Field(None, description=_ACK_WINDOW_NOTE)


class EndpointDisable(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field(
        min_length=1,
        max_length=500,
        pattern=_TEXT,
        description=f"Kept on the endpoint. {UNSAFE_TEXT_NOTE}",
        json_schema_extra=safe_text_schema(),
    )


class EndpointOut(BaseModel):
    """An endpoint as its tenant sees it; never a secret."""

    id: uuid.UUID
    url: str
    description: str | None
    event_types: list[str] = Field(description="`[]` means every event type.")
    state: Literal["active", "disabled"]
    disabled_reason: str | None
    breaker_state: Literal["closed", "open"]
    consecutive_failures: int
    failing_since: datetime | None
    created_at: datetime
    verification: Literal["pending", "verified"] = Field(
        description="`pending` until the URL echoed a verification challenge; until then "
        "its deliveries are held (see docs/delivery.md, Verification)."
    )
    verified_at: datetime | None
    acknowledgement_window_seconds: int | None = Field(description=_ACK_WINDOW_NOTE)

    @classmethod
    def of(cls, e: Endpoint) -> EndpointOut:
        return cls(
            id=e.id,
            url=e.url,
            description=e.description,
            event_types=list(e.event_types),
            state=e.state,
            disabled_reason=e.disabled_reason,
            breaker_state=e.breaker_state,
            consecutive_failures=e.consecutive_failures,
            failing_since=e.failing_since,
            created_at=e.created_at,
            verification=e.verification,
            verified_at=e.verified_at,
            acknowledgement_window_seconds=e.ack_window_seconds,
        )


class EndpointUpdate(BaseModel):
    """A new URL for an endpoint (checked like a registration, then verified again),
    and/or its acknowledgement window. At least one of the two."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str | None = Field(
        None,
        min_length=1,
        max_length=2048,
        description="`https` on an allowed port, every resolved address global. The "
        "endpoint is `pending` again until the new URL echoes a challenge.",
    )
    acknowledgement_window_seconds: AckWindow | None = Field(
        None,
        description=f"{_ACK_WINDOW_NOTE} Deliveries created from then on carry the new "
        "window; earlier ones keep theirs.",
    )


class VerificationOut(BaseModel):
    """The outcome of a verification challenge sent now."""

    endpoint: EndpointOut
    verified: bool
    reason: str = Field(
        description="`verified`, or why not: `wrong_echo`, `http_<status>`, "
        "`egress_blocked`, `timeout`, `transport`, `signing`, `not_pending` (the URL "
        "changed or the endpoint was disabled meanwhile)."
    )


class TestEventOut(BaseModel):
    """What a test event sent now got back."""

    endpoint_id: uuid.UUID
    event_type: Literal["endpoint.test.v1"]
    webhook_id: str = Field(description="`tst_…`: a fresh id per test event.")
    webhook_timestamp: int
    signature_key_ids: list[str]
    delivered: bool = Field(description="The endpoint answered 2xx.")
    http_status: int | None
    latency_ms: float
    error_class: str | None = Field(
        description="Why not delivered: `http_<status>`, `timeout`, `transport`, "
        "`egress_blocked`, …"
    )


class SigningKeyOut(BaseModel):
    """Key metadata: a retired key keeps signing until ``expires_at`` (the grace period)."""

    key_id: str
    created_at: datetime
    retired_at: datetime | None
    expires_at: datetime | None


class EndpointDetail(EndpointOut):
    keys: list[SigningKeyOut]


class EndpointList(BaseModel):
    items: list[EndpointOut]


class EndpointSecret(BaseModel):
    """A new signing secret, shown in this response only."""

    endpoint: EndpointOut
    key_id: str
    secret: str = Field(description="`whsec_` + base64; shown once, store it now.")
    previous_key_id: str | None = Field(
        None, description="Rotation: the key that keeps signing until previous_expires_at."
    )
    previous_expires_at: datetime | None = None

    @classmethod
    def of(cls, issued: IssuedSecret) -> EndpointSecret:
        return cls(
            endpoint=EndpointOut.of(issued.endpoint),
            key_id=issued.key_id,
            secret=issued.secret,
            previous_key_id=issued.previous_key_id,
            previous_expires_at=issued.previous_expires_at,
        )


def registry(request: Request) -> EndpointRegistry:
    """The app's registry, rebuilt only when the app's pool changes (one per pool)."""
    ctx: ApiContext = request.app.state.fenceline
    pool = ctx.services.pool
    cached: EndpointRegistry | None = getattr(request.app.state, "endpoint_registry", None)
    if cached is None or cached.pool is not pool:
        s = ctx.settings
        cached = EndpointRegistry(
            pool,
            guard_from_settings(s),
            SecretBox.from_settings(s),
            clock=ctx.clock,
            rotation_grace_seconds=s.webhook_rotation_grace_seconds,
        )
        request.app.state.endpoint_registry = cached
    return cached


def _operator(principal: Principal) -> None:
    if not principal.is_operator:
        raise ApiProblem(403, "managing webhook endpoints needs the operator scope", reason="scope")


def _refused(exc: EgressBlocked) -> ApiProblem:
    return ApiProblem(
        422, f"the URL is refused by the egress policy ({exc.reason})", reason="egress_blocked"
    )


_LOCATION = {"Location": {"description": "The endpoint's URL", "schema": {"type": "string"}}}
_WRITE = (401, 403, 404, 422, 503)

router = APIRouter(prefix=PREFIX, tags=["webhook endpoints"])


@router.post(
    "",
    summary="Register a webhook endpoint; the response carries its secret, once",
    status_code=201,
    response_model=EndpointSecret,
    responses={
        201: {"description": "Registered", "headers": _LOCATION},
        **problem_responses(400, 401, 403, 413, 422, 503),
    },
)
async def register_endpoint(
    request: Request, response: Response, principal: Caller, body: EndpointCreate
) -> EndpointSecret:
    _operator(principal)
    refuse_unsafe_text("description", body.description)
    kw: dict[str, Any] = {
        "description": body.description,
        "ack_window_seconds": body.acknowledgement_window_seconds,
    }
    if body.event_types is not None:
        kw["event_types"] = list(dict.fromkeys(body.event_types))
    try:
        issued = await registry(request).register(principal.tenant_id, body.url, **kw)
    except EgressBlocked as exc:
        raise _refused(exc) from None
    response.headers["Location"] = f"{PREFIX}/{issued.endpoint.id}"
    return EndpointSecret.of(issued)


@router.get(
    "",
    summary="This tenant's webhook endpoints (no secrets)",
    response_model=EndpointList,
    responses=problem_responses(401, 422, 503),
)
async def list_endpoints(request: Request, principal: Caller) -> EndpointList:
    endpoints = await registry(request).list_endpoints(principal.tenant_id)
    return EndpointList(items=[EndpointOut.of(e) for e in endpoints])


@router.get(
    "/{endpoint_id}",
    summary="One webhook endpoint with its signing keys' metadata (no secrets)",
    response_model=EndpointDetail,
    responses=problem_responses(401, 404, 422, 503),
)
async def get_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID
) -> EndpointDetail:
    reg = registry(request)
    endpoint = await reg.get(principal.tenant_id, endpoint_id)
    keys = await reg.keys(principal.tenant_id, endpoint_id)
    return EndpointDetail(
        **EndpointOut.of(endpoint).model_dump(), keys=[SigningKeyOut(**k) for k in keys]
    )


@router.post(
    "/{endpoint_id}/rotate",
    summary="Issue a new signing secret; the previous one keeps signing for the grace period",
    response_model=EndpointSecret,
    responses=problem_responses(*_WRITE),
)
async def rotate_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID
) -> EndpointSecret:
    _operator(principal)
    return EndpointSecret.of(await registry(request).rotate(principal.tenant_id, endpoint_id))


@router.post(
    "/{endpoint_id}/disable",
    summary="Stop deliveries to an endpoint; waiting deliveries are abandoned",
    response_model=EndpointOut,
    responses=problem_responses(400, 413, *_WRITE),
)
async def disable_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID, body: EndpointDisable
) -> EndpointOut:
    _operator(principal)
    refuse_unsafe_text("reason", body.reason)
    reg = registry(request)
    return EndpointOut.of(await reg.disable(principal.tenant_id, endpoint_id, body.reason))


@router.post(
    "/{endpoint_id}/enable",
    summary="Re-check the URL and reactivate an endpoint with a closed breaker",
    response_model=EndpointOut,
    responses=problem_responses(*_WRITE),
)
async def enable_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID
) -> EndpointOut:
    _operator(principal)
    try:
        endpoint = await registry(request).enable(principal.tenant_id, endpoint_id)
    except EgressBlocked as exc:
        raise _refused(exc) from None
    return EndpointOut.of(endpoint)


@router.patch(
    "/{endpoint_id}",
    summary="Change an endpoint's URL (verified again before deliveries resume) or its "
    "acknowledgement window",
    response_model=EndpointOut,
    responses=problem_responses(400, 413, *_WRITE),
)
async def update_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID, body: EndpointUpdate
) -> EndpointOut:
    _operator(principal)
    fields = body.model_fields_set
    if not fields or (body.url is None and "acknowledgement_window_seconds" not in fields):
        raise ApiProblem(422, "give a url or an acknowledgement_window_seconds", reason="empty")
    reg = registry(request)
    endpoint = await reg.get(principal.tenant_id, endpoint_id)
    if body.url is not None:
        try:
            endpoint = await reg.change_url(principal.tenant_id, endpoint_id, body.url)
        except EgressBlocked as exc:
            raise _refused(exc) from None
    if "acknowledgement_window_seconds" in fields:
        endpoint = await reg.set_ack_window(
            principal.tenant_id, endpoint_id, body.acknowledgement_window_seconds
        )
    return EndpointOut.of(endpoint)


@router.post(
    "/{endpoint_id}/verify",
    summary="Send a verification challenge now; held deliveries flow once it is echoed",
    response_model=VerificationOut,
    responses=problem_responses(409, *_WRITE),
)
async def verify_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID
) -> VerificationOut:
    """The dispatcher challenges pending endpoints by itself (at registration, after a
    URL change, then with back-off); this sends one now and answers its outcome. 409:
    the endpoint is not pending (verified already, disabled, or being challenged)."""
    _operator(principal)
    reg = registry(request)
    await reg.get(principal.tenant_id, endpoint_id)  # 404 for another tenant's
    ctx: ApiContext = request.app.state.fenceline
    s = ctx.settings
    client = EgressClient(guard_from_settings(s), timeout_seconds=s.delivery_timeout_seconds)
    try:
        challenger = EndpointChallenger(reg.pool, client, reg.box, clock=reg.clock)
        result = await challenger.verify(principal.tenant_id, endpoint_id)
    finally:
        await client.aclose()
    if result is None:
        raise ApiProblem(409, "the endpoint is not pending verification", reason="not_pending")
    endpoint = await reg.get(principal.tenant_id, endpoint_id)
    return VerificationOut(
        endpoint=EndpointOut.of(endpoint), verified=result.verified, reason=result.reason
    )


@router.post(
    "/{endpoint_id}/test",
    summary="Send a signed test event (endpoint.test.v1) now; never an ERP posting",
    response_model=TestEventOut,
    responses=problem_responses(409, *_WRITE),
)
async def test_endpoint(
    request: Request, principal: Caller, endpoint_id: uuid.UUID
) -> TestEventOut:
    """One signed POST to the endpoint's registered URL through the egress guard, like a
    delivery but carrying no job: the answer is what came back (a non-2xx answer is a
    200 here with `delivered: false`). 409 `endpoint_disabled` or `not_verified`: an
    endpoint receives nothing before it echoed a verification challenge."""
    _operator(principal)
    reg = registry(request)
    ctx: ApiContext = request.app.state.fenceline
    s = ctx.settings
    client = EgressClient(guard_from_settings(s), timeout_seconds=s.delivery_timeout_seconds)
    try:
        result = await EndpointProbe(reg.pool, client, reg.box, clock=reg.clock).send(
            principal.tenant_id, endpoint_id
        )
    except DeliveryRefused as exc:
        raise ApiProblem(409, str(exc), reason=exc.reason) from None
    finally:
        await client.aclose()
    return TestEventOut(
        endpoint_id=result.endpoint_id,
        event_type="endpoint.test.v1",
        webhook_id=result.webhook_id,
        webhook_timestamp=result.webhook_timestamp,
        signature_key_ids=list(result.key_ids),
        delivered=result.delivered,
        http_status=result.http_status,
        latency_ms=result.latency_ms,
        error_class=result.error_class,
    )
