"""The review console and operator dashboard: server-rendered pages under ``/console``.

Reading works without JavaScript (plain links and GET forms); deciding is plain
HTML forms. ``/console/static/console.js`` only adds keyboard shortcuts and live
updates from the SSE stream. Invariants:

* **Tenant scoping on every page and fragment**: each route resolves the caller
  (:mod:`pipeline.api.console.caller`) and reads through tenant-scoped queries;
  another tenant's job renders the same 404 page as a missing one.
* **Scopes**: any key of the tenant may read the queue and a job; correcting and
  deciding need ``review`` (or ``operator``); the dashboard and timelines need
  ``operator``.
* **Sessions, CSRF, headers**: see :mod:`pipeline.api.console.session` and
  :mod:`pipeline.api.console.headers`. Every POST made with the session cookie
  must carry the session's CSRF token.

Each route is a thin caller of the views (:mod:`pipeline.api.console.views`) and
renderers; signing in and out is :mod:`pipeline.api.console.sign_in`, the operator's
pages :mod:`pipeline.api.console.operator_pages`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError

from pipeline.api.console.caller import (
    ConsoleRefusal,
    checked_form,
    console_caller,
    csrf_for,
    need,
)
from pipeline.api.console.flash import flash_text, flash_url
from pipeline.api.console.headers import ConsoleHeadersMiddleware
from pipeline.api.console.operator_pages import router as operator_router
from pipeline.api.console.page_view import PageView
from pipeline.api.console.render import STATIC, render, render_fragment, review_page_model
from pipeline.api.console.sign_in import router as sign_in_router
from pipeline.api.console.views import ReviewSubject
from pipeline.api.console.xml_evidence import xml_evidence
from pipeline.api.context import api_context
from pipeline.api.corrections import CorrectionIn, ReasonsRemain
from pipeline.api.evidence_marks import evidence_spans
from pipeline.api.problems import ApiProblem
from pipeline.api.review import REVIEW_SCOPES, ReviewDecisionIn
from pipeline.api.status_stream import StatusStream, parse_last_event_id
from pipeline.errors import DataKeyShredded, DocumentStoreUnavailable, NotFound
from pipeline.states import JobState
from pipeline.tenants import (
    Principal,
    principal_for_key_id,
    session_principal,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix="/console", include_in_schema=False)

_Reason = Annotated[str | None, Query(max_length=64, pattern=r"^[a-z0-9_]*$")]
_Supplier = Annotated[str | None, Query(max_length=200)]
#: A message key and the job it names: only the server's own texts show (see ``flash``).
_FlashKey = Annotated[str | None, Query(max_length=200)]
_FlashJob = Annotated[str | None, Query(max_length=200)]


def _supplier_filter(supplier: str | None) -> str | None:
    """The supplier filter as the queue query takes it: None when empty; a NUL (which
    no PostgreSQL text holds) is a 400 page, not a database error."""
    if supplier and "\x00" in supplier:
        raise ConsoleRefusal(400, "The supplier filter cannot contain a NUL character.")
    return supplier or None


def _first(data: dict[str, Any], name: str) -> str | None:
    values = data.get(name) or []
    return str(values[0]) if values else None


def _note(form: dict[str, Any]) -> str:
    """The form's note, trimmed, its lines as ``\\n`` (a browser sends a textarea's as CRLF)."""
    return (_first(form, "note") or "").replace("\r\n", "\n").strip()


def _page(request: Request, principal: Principal, **context: Any) -> dict[str, Any]:
    return {"principal": principal, "csrf": csrf_for(request), **context}


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleRefusal)
    if (
        exc.status == 401
        and request.method == "GET"
        and not request.url.path.endswith(("/rows", "/state", "/events", "/body"))
    ):
        return RedirectResponse("/console/login", status_code=303)
    titles = {
        400: "Bad request",
        401: "Sign in required",
        403: "Not allowed",
        404: "Not found",
        410: "Shredded",
    }
    return render(
        "error.html", exc.status, title=titles.get(exc.status, "Error"), message=exc.message
    )


_NOT_FOUND = ConsoleRefusal(404, "There is no such job.")
_SHREDDED = "This job's content was shredded: its tenant's data key was destroyed."


async def _subject(request: Request, principal: Principal, job_id: uuid.UUID) -> ReviewSubject:
    """The job as the caller's tenant sees it; another tenant's job is a 404 like a missing one."""
    try:
        return await api_context(request).services.console.subject(principal, job_id)
    except NotFound:
        raise _NOT_FOUND from None


async def _page_view(
    request: Request, principal: Principal, subject: ReviewSubject
) -> tuple[list[PageView] | None, str | None]:
    """A file's pages with the result's evidence boxed, or None and why (a pasted text
    has no pages: None and no reason); the page then shows the text view alone."""
    if not subject.from_file:
        return None, None
    pages = api_context(request).services.pages
    try:
        spans = evidence_spans(subject.result or {})
        return await pages.view(principal, subject.job_id, spans), None
    except NotFound:
        return None, "The file's pages cannot be shown; its text is."
    except DocumentStoreUnavailable:
        return None, "The document store did not answer; the file's text is shown."
    except DataKeyShredded:
        return None, "The file's text was shredded: its tenant's data key was destroyed."


async def _review_action(request: Request, job_id: uuid.UUID) -> tuple[Principal, dict[str, Any]]:
    """The prologue every review action (correct, reject) shares, in the order its
    refusals are answered: the caller (401), the form with its CSRF check (403), the job
    within the caller's tenant (404), then a scope to review (403).
    """
    principal = await console_caller(request)
    form = await checked_form(request)
    await _subject(request, principal, job_id)
    need(principal, REVIEW_SCOPES, "correct or decide reviews")
    return principal, form


@router.get("")
async def console_home() -> RedirectResponse:
    return RedirectResponse("/console/queue", status_code=303)


@router.get("/static/console.js")
async def console_js() -> FileResponse:
    return FileResponse(STATIC / "console.js", media_type="text/javascript")


@router.get("/static/console.css")
async def console_css() -> FileResponse:
    return FileResponse(STATIC / "console.css", media_type="text/css")


@router.get("/queue")
async def queue_page(
    request: Request,
    reason: _Reason = None,
    supplier: _Supplier = None,
    flash: _FlashKey = None,
    job: _FlashJob = None,
) -> Response:
    principal = await console_caller(request)
    items, codes = await api_context(request).services.console.queue(
        principal, reason=reason or None, supplier=_supplier_filter(supplier)
    )
    return render(
        "queue.html",
        **_page(request, principal),
        title="Review queue",
        page="queue",
        items=items,
        codes=codes,
        reason=reason,
        supplier=supplier,
        flash=flash_text(flash, job),
        events_url="/console/events",
        fragment_url=str(request.url.replace(path="/console/queue/rows")),
    )


@router.get("/queue/rows")
async def queue_rows(
    request: Request, reason: _Reason = None, supplier: _Supplier = None
) -> Response:
    principal = await console_caller(request)
    items, _ = await api_context(request).services.console.queue(
        principal, reason=reason or None, supplier=_supplier_filter(supplier)
    )
    return render_fragment("queue_rows.html", items=items)


@router.get("/jobs/{job_id}")
async def job_page(
    request: Request,
    job_id: uuid.UUID,
    flash: _FlashKey = None,
    job: _FlashJob = None,
) -> Response:
    principal = await console_caller(request)
    subject = await _subject(request, principal, job_id)
    return await _job_page(request, principal, subject, flash=flash_text(flash, job))


async def _job_page(
    request: Request,
    principal: Principal,
    subject: ReviewSubject,
    *,
    status: int = 200,
    flash: str | None = None,
    refused: ReasonsRemain | None = None,
    form: dict[str, Any] | None = None,
) -> Response:
    """The review page; after a refused approval, with the reasons that remain listed
    and the reviewer's values, overrides and note kept in the form (nothing was stored)."""
    submitted = _submitted_values(form or {})
    model = review_page_model(subject, submitted)
    page_view, page_note = await _page_view(request, principal, subject)
    can_decide = subject.state == JobState.REVIEW_REQUIRED.value and bool(
        REVIEW_SCOPES & principal.scopes
    )
    return render(
        "job.html",
        status,
        **_page(request, principal),
        title=f"Job {subject.job_id}",
        page="job",
        subject=subject,
        can_decide=can_decide,
        editable=can_decide and model["approvable"],
        flash=flash,
        refused=refused,
        kept_overrides={str(v) for v in (form or {}).get("override", [])},
        kept_note=(_first(form or {}, "note") or ""),
        events_url=f"/console/jobs/{subject.job_id}/events",
        state_version=subject.state_version,
        page_view=page_view,
        page_note=page_note,
        xml_evidence=xml_evidence(subject.result, subject.validation, bool(page_view)),
        **model,
    )


def _submitted_values(form: dict[str, Any]) -> dict[str, str]:
    return {k[len("value.") :]: str(v[0]) for k, v in form.items() if k.startswith("value.") and v}


@router.get("/jobs/{job_id}/pages/{number}.png")
async def page_image(request: Request, job_id: uuid.UUID, number: int) -> Response:
    """Page ``number`` of the job's file as PNG: 404 for another tenant's job, a pasted
    text or a page the file does not have."""
    principal = await console_caller(request)
    try:
        data = await api_context(request).services.pages.png(principal, job_id, number)
    except NotFound:
        raise ConsoleRefusal(404, "There is no such page.") from None
    except DocumentStoreUnavailable:
        raise ConsoleRefusal(503, "The document store did not answer; try again.") from None
    except DataKeyShredded:
        raise ConsoleRefusal(410, _SHREDDED) from None
    return Response(data, media_type="image/png")


@router.get("/jobs/{job_id}/state")
async def job_state(request: Request, job_id: uuid.UUID) -> Response:
    principal = await console_caller(request)
    subject = await _subject(request, principal, job_id)
    return render_fragment("state.html", subject=subject)


@router.post("/jobs/{job_id}/correct")
async def correct(request: Request, job_id: uuid.UUID) -> Response:
    principal, form = await _review_action(request, job_id)
    ctx = api_context(request)
    overrides = []
    for raw in form.get("override", []):
        code, _, field = str(raw).partition("|")
        overrides.append({"code": code, "field": field})
    try:
        body = CorrectionIn.model_validate(
            {
                "state_version": int(_first(form, "state_version") or 0),
                "values": _submitted_values(form),
                "overrides": overrides,
                "note": _note(form) or None,
                "approve": _first(form, "action") == "approve",
            }
        )
    except (ValidationError, ValueError):
        raise ConsoleRefusal(
            422, "The correction is not valid (a note is at most 4000 characters)."
        ) from None
    try:
        out = await ctx.services.corrections.correct(principal, job_id, body)
    except ReasonsRemain as exc:
        # Refused and nothing stored: the page again, the reasons listed, the form kept.
        subject = await _subject(request, principal, job_id)
        return await _job_page(request, principal, subject, status=422, refused=exc, form=form)
    except ApiProblem as exc:
        raise ConsoleRefusal(exc.status, exc.detail) from None
    except DataKeyShredded:
        raise ConsoleRefusal(410, _SHREDDED) from None
    if out.state is JobState.SUCCEEDED:
        nxt = await ctx.services.console.queue(principal, reason=None, supplier=None, limit=1)
        target = f"/console/jobs/{nxt[0][0].job_id}" if nxt[0] else "/console/queue"
        return RedirectResponse(flash_url(target, "approved", job_id), status_code=303)
    message = "saved-reasons" if out.reasons else "saved"
    return RedirectResponse(flash_url(f"/console/jobs/{job_id}", message), status_code=303)


@router.post("/jobs/{job_id}/reject")
async def reject(request: Request, job_id: uuid.UUID) -> Response:
    principal, form = await _review_action(request, job_id)
    ctx = api_context(request)
    try:
        body = ReviewDecisionIn(
            decision="reject",
            note=_note(form),
            state_version=int(_first(form, "state_version") or 0),
        )
    except (ValidationError, ValueError):
        raise ConsoleRefusal(422, "A rejection needs a note.") from None
    try:
        await ctx.services.review.decide(principal, job_id, body)
    except ApiProblem as exc:
        raise ConsoleRefusal(exc.status, exc.detail) from None
    return RedirectResponse(flash_url("/console/queue", "rejected", job_id), status_code=303)


@router.get("/events")
async def tenant_events(request: Request) -> StreamingResponse:
    principal = await console_caller(request)
    return await _events(request, principal, None)


@router.get("/jobs/{job_id}/events")
async def job_events(request: Request, job_id: uuid.UUID) -> StreamingResponse:
    principal = await console_caller(request)
    try:
        await api_context(request).services.views.visible(principal, job_id)
    except NotFound:
        raise _NOT_FOUND from None
    return await _events(request, principal, job_id)


async def _events(
    request: Request, principal: Principal, job_id: uuid.UUID | None
) -> StreamingResponse:
    ctx = api_context(request)

    session_id = getattr(request.state, "console_session", None)

    async def still_valid() -> bool:
        """The key, and for a session's stream the session too, still stands: a
        stream opened with a session ends after its logout as after a revocation."""
        async with ctx.services.pool.acquire(
            timeout=ctx.settings.db_acquire_timeout_seconds
        ) as conn:
            if session_id is not None:
                current = await session_principal(conn, session_id)
            else:
                current = await principal_for_key_id(conn, principal.key_id)
        return current is not None and current.tenant_id == principal.tenant_id

    stream = StatusStream(
        ctx.services.pool,
        await ctx.hub(),
        ctx.settings,
        tenant_id=principal.tenant_id,
        job_id=job_id,
        last_event_id=parse_last_event_id(request.headers.get("last-event-id")),
        key_valid=still_valid,
    )

    async def body() -> AsyncIterator[str]:
        async for chunk in stream.events():
            yield chunk

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def install_console(app: FastAPI) -> None:
    """Mount the console's routes, its refusal pages and its security headers."""
    app.include_router(sign_in_router)
    app.include_router(router)
    app.include_router(operator_router)
    app.add_exception_handler(ConsoleRefusal, _refused)
    app.add_middleware(ConsoleHeadersMiddleware)
