"""The operator's console pages: the dashboard and what each of its counts opens.

Every count on the dashboard is a link to the rows behind it, and each list offers the
step an operator takes next (issue 45, defect 7):

* jobs by state → ``/console/jobs?state=…``: each job opens its page and its timeline;
  a FAILED_TERMINAL job has a re-drive form (``POST /console/jobs/{id}/redrive``, the
  same audited re-drive as ``POST /v1/extraction-jobs/{id}/redrive``);
* the review queue → ``/console/queue``; dead letters → ``/console/dead-letters``;
* deliveries by state → ``/console/deliveries?state=…``; an endpoint (its breaker,
  its failures) → ``/console/endpoints/{id}`` with the deliveries to it; one delivery
  → ``/console/deliveries/{id}`` with every attempt, and **Resend** (``POST
  /console/deliveries/{id}/resend``, the same resend as ``POST /v1/deliveries/{id}/resend``:
  a new attempt under the same delivery id, which the ERP deduplicates).

The dashboard page polls ``/console/dashboard/body`` (``static/console.js``, no inline
script: the strict CSP of :mod:`~pipeline.api.console.headers` holds) and swaps the
fragment in, so it stays current without a reload; without JavaScript it is a page
with a Refresh link. Every page needs the ``operator`` scope and reads through the
caller's tenant only: another tenant's job or endpoint is the same 404 as a missing one.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from pipeline.api.console.caller import (
    ConsoleRefusal,
    checked_form,
    console_caller,
    csrf_for,
    need,
)
from pipeline.api.console.flash import flash_text, flash_url
from pipeline.api.console.render import render, render_fragment
from pipeline.api.context import api_context
from pipeline.api.redrive import RedriveIn
from pipeline.delivery import AckState, DeliveryLog, DeliveryState
from pipeline.errors import DeliveryRefused, NotFound, RedriveRefused
from pipeline.jobs import RedriveRequest, redrive_job
from pipeline.states import JobState
from pipeline.tenants import Principal

router = APIRouter(prefix="/console", include_in_schema=False)

OPERATOR = frozenset({"operator"})
#: Seconds between the dashboard's refreshes unless ``?refresh=`` asks for another.
REFRESH_SECONDS = 10

_State = Annotated[str | None, Query(max_length=32)]
_Refresh = Annotated[int, Query(ge=2, le=3600)]
_FlashKey = Annotated[str | None, Query(max_length=200)]
_FlashJob = Annotated[str | None, Query(max_length=200)]

_NOT_FOUND = ConsoleRefusal(404, "There is no such job.")

#: The step an operator takes for jobs in each state: (link text, where).
JOB_ACTIONS: dict[str, tuple[str, str]] = {
    JobState.REVIEW_REQUIRED.value: ("review", "/console/queue"),
    JobState.FAILED_TERMINAL.value: ("re-drive", "/console/jobs?state=FAILED_TERMINAL"),
}
#: The same for deliveries in each state.
DELIVERY_ACTIONS: dict[str, str] = {
    DeliveryState.FAILED.value: "open the endpoint",
    DeliveryState.ABANDONED.value: "open the endpoint",
    DeliveryState.RETRY_SCHEDULED.value: "check the breaker",
}


async def _operator(request: Request, what: str) -> Principal:
    principal = await console_caller(request)
    need(principal, OPERATOR, what)
    return principal


def _page(request: Request, principal: Principal, **context: Any) -> dict[str, Any]:
    return {"principal": principal, "csrf": csrf_for(request), **context}


def _state(
    value: str | None, states: type[JobState] | type[DeliveryState] | type[AckState]
) -> str | None:
    """A state filter: None for none; a name the state machine lacks is a 400 page."""
    if not value:
        return None
    if value not in {s.value for s in states}:
        raise ConsoleRefusal(400, "There is no such state.")
    return value


@router.get("/dashboard")
async def dashboard(request: Request, refresh: _Refresh = REFRESH_SECONDS) -> Response:
    principal = await _operator(request, "see the operator dashboard")
    data = await api_context(request).services.console.dashboard(principal)
    return render(
        "dashboard.html",
        **_page(request, principal),
        title="Dashboard",
        page="dashboard",
        d=data,
        job_actions=JOB_ACTIONS,
        delivery_actions=DELIVERY_ACTIONS,
        refresh_seconds=refresh,
    )


@router.get("/dashboard/body")
async def dashboard_body(request: Request) -> Response:
    """The dashboard's contents alone, which the page's script swaps in on each poll."""
    principal = await _operator(request, "see the operator dashboard")
    data = await api_context(request).services.console.dashboard(principal)
    return render_fragment(
        "dashboard_body.html", d=data, job_actions=JOB_ACTIONS, delivery_actions=DELIVERY_ACTIONS
    )


@router.get("/jobs")
async def job_list(
    request: Request, state: _State = None, flash: _FlashKey = None, job: _FlashJob = None
) -> Response:
    principal = await _operator(request, "list jobs")
    wanted = _state(state, JobState)
    jobs = await api_context(request).services.console.jobs(principal, wanted)
    return render(
        "jobs.html",
        **_page(request, principal),
        title=f"Jobs {wanted or ''}".strip(),
        page="jobs",
        state=wanted,
        jobs=jobs,
        flash=flash_text(flash, job),
    )


@router.post("/jobs/{job_id}/redrive")
async def redrive(request: Request, job_id: uuid.UUID) -> Response:
    """Re-drive one FAILED_TERMINAL job from the jobs list; audited like the REST call.
    Refusals in the order the review actions answer them: the caller (401), the form's
    CSRF token (403), the job within the caller's tenant (404), the scope (403)."""
    principal = await console_caller(request)
    form = await checked_form(request)
    ctx = api_context(request)
    try:
        await ctx.services.views.visible(principal, job_id)
    except NotFound:
        raise _NOT_FOUND from None
    need(principal, OPERATOR, "re-drive jobs")
    reasons = form.get("reason") or [""]
    try:
        body = RedriveIn.model_validate({"reason": str(reasons[0]).strip()})
    except ValidationError:
        raise ConsoleRefusal(422, "A re-drive needs a reason (at most 4000 characters).") from None
    s = ctx.settings
    try:
        await redrive_job(
            ctx.services.pool,
            principal.tenant_id,
            job_id,
            RedriveRequest(
                requested_by=f"key:{principal.key_id}",
                reason=body.reason,
                attempts=s.redrive_attempts,
                deadline_seconds=s.default_deadline_seconds,
            ),
            clock=ctx.clock,
            settings=s,
        )
    except NotFound:
        raise _NOT_FOUND from None
    except RedriveRefused as exc:
        raise ConsoleRefusal(409, f"Not re-driven: {exc}") from None
    target = "/console/jobs?state=FAILED_TERMINAL"
    return RedirectResponse(flash_url(target, "redriven", job_id), status_code=303)


@router.get("/jobs/{job_id}/timeline")
async def job_timeline(request: Request, job_id: uuid.UUID) -> Response:
    principal = await console_caller(request)
    try:
        data = await api_context(request).services.console.timeline(principal, job_id)
    except NotFound:
        raise _NOT_FOUND from None
    need(principal, OPERATOR, "see job timelines")
    return render(
        "timeline.html",
        **_page(request, principal),
        title="Timeline",
        page="timeline",
        data=data,
        job=data["job"],
    )


@router.get("/dead-letters")
async def dead_letters(request: Request) -> Response:
    principal = await _operator(request, "see dead letters")
    rows = await api_context(request).services.console.dead_letters(principal)
    return render(
        "dead_letters.html",
        **_page(request, principal),
        title="Dead letters",
        page="dead-letters",
        letters=rows,
    )


@router.get("/deliveries")
async def deliveries(request: Request, state: _State = None, ack: _State = None) -> Response:
    principal = await _operator(request, "see deliveries")
    wanted = _state(state, DeliveryState)
    wanted_ack = _state(ack, AckState)
    rows, _ = await api_context(request).services.console.deliveries(
        principal, state=wanted, endpoint_id=None, ack_state=wanted_ack
    )
    return render(
        "deliveries.html",
        **_page(request, principal),
        title=f"Deliveries {wanted or ''}".strip(),
        page="deliveries",
        state=wanted,
        ack=wanted_ack,
        deliveries=rows,
        endpoint=None,
    )


@router.get("/endpoints/{endpoint_id}")
async def endpoint_page(request: Request, endpoint_id: uuid.UUID) -> Response:
    principal = await _operator(request, "see endpoints")
    try:
        rows, endpoint = await api_context(request).services.console.deliveries(
            principal, state=None, endpoint_id=endpoint_id
        )
    except NotFound:
        raise ConsoleRefusal(404, "There is no such endpoint.") from None
    return render(
        "deliveries.html",
        **_page(request, principal),
        title="Endpoint",
        page="endpoint",
        state=None,
        ack=None,
        deliveries=rows,
        endpoint=endpoint,
    )


_NO_DELIVERY = ConsoleRefusal(404, "There is no such delivery.")


def _delivery_log(request: Request) -> DeliveryLog:
    ctx = api_context(request)
    return DeliveryLog(ctx.services.pool, clock=ctx.clock)


@router.get("/deliveries/{delivery_id}")
async def delivery_page(
    request: Request, delivery_id: uuid.UUID, flash: _FlashKey = None
) -> Response:
    """One delivery: its endpoint, state, every attempt, and Resend where it may be."""
    principal = await _operator(request, "see deliveries")
    try:
        delivery = await _delivery_log(request).get(principal.tenant_id, delivery_id)
    except NotFound:
        raise _NO_DELIVERY from None
    return render(
        "delivery.html",
        **_page(request, principal),
        title="Delivery",
        page="delivery",
        d=delivery,
        flash=flash_text(flash, None),
    )


@router.post("/deliveries/{delivery_id}/resend")
async def resend(request: Request, delivery_id: uuid.UUID) -> Response:
    """Resend one delivery; refusals in the order the other actions answer them: the
    caller (401), the form's CSRF token (403), the delivery within the caller's tenant
    (404), the scope (403); then the delivery's own state (409, or 410 for a body that
    erasure or retention removed), with nothing written."""
    principal = await console_caller(request)
    await checked_form(request)
    log = _delivery_log(request)
    try:
        await log.get(principal.tenant_id, delivery_id)
    except NotFound:
        raise _NO_DELIVERY from None
    need(principal, OPERATOR, "resend deliveries")
    try:
        await log.resend(principal.tenant_id, delivery_id, requested_by=f"key:{principal.key_id}")
    except NotFound:
        raise _NO_DELIVERY from None
    except DeliveryRefused as exc:
        status = 410 if exc.reason in ("body_erased", "body_removed") else 409
        raise ConsoleRefusal(status, f"Not resent: {exc}") from None
    target = f"/console/deliveries/{delivery_id}"
    return RedirectResponse(flash_url(target, "resent"), status_code=303)
