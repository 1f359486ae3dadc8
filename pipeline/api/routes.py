"""The job routes: acceptance, reads, status streams, review, ``/metrics``.

Each route only wires the request to the service that holds the invariant (see
:mod:`pipeline.api.app`); every ``/v1`` route takes the caller's :data:`Caller`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipeline.api.context import Caller, api_context
from pipeline.api.intake import JobAccepted
from pipeline.api.job_views import JobPage, JobResult, JobStatus
from pipeline.api.metrics import acceptance_timer
from pipeline.api.problems import (
    DATABASE_UNAVAILABLE,
    ApiProblem,
    problem_responses,
)
from pipeline.api.review import ReviewDecisionIn, ReviewDecisionOut
from pipeline.api.status_stream import SSE_EVENTS, StatusStream, parse_last_event_id
from pipeline.api.submission import IDEMPOTENCY_KEY_PATTERN, read_submission
from pipeline.errors import AdmissionRejected, IdempotencyConflict
from pipeline.queries import q
from pipeline.states import JobState
from pipeline.tenants import Principal

_SSE = {
    "description": "Server-Sent Events: `state` events (id = event cursor), `snapshot`, "
    "`reset`, `revoked`, `unavailable`, `reconnect`, `end`",
    # Each Server-Sent Event (not the whole body), as schemathesis and OpenAPI 3.2 read it.
    "content": {
        "text/event-stream": {
            "schema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string", "enum": list(SSE_EVENTS)},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "id": {"type": "string", "pattern": "^[0-9]+$"},
                    "retry": {"type": "integer", "minimum": 0},
                },
            }
        }
    },
}
_LOCATION = {"Location": {"description": "The job's status URL", "schema": {"type": "string"}}}
_IDEMPOTENCY_KEY_DOC = (
    "Unique per tenant. Same key + same request → same job (202, then 200 with the original "
    "receipt); same key + different request → 409; a malformed key → 400. Without it the "
    "server generates a key, and a retried request becomes a second job."
)
#: The Idempotency-Key header as documented. The route reads the header itself
#: (``SingleValuedHeadersMiddleware`` refuses a repeated one, and
#: :func:`pipeline.api.submission.resolve_idempotency_key` answers a malformed one with its
#: 400 problem, where a FastAPI pattern would make it a 422): a declared header
#: parameter cost FastAPI's parameter solving on every accept.
_IDEMPOTENCY_KEY_PARAMETER: dict[str, Any] = {
    "description": _IDEMPOTENCY_KEY_DOC,
    "in": "header",
    "name": "Idempotency-Key",
    "required": False,
    "schema": {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": _IDEMPOTENCY_KEY_DOC,
        "pattern": IDEMPOTENCY_KEY_PATTERN,
        "title": "Idempotency-Key",
    },
}


_SUBMISSION_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/JobSubmission"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["document"],
                "properties": {
                    "document": {
                        "type": "string",
                        "minLength": 1,
                        "contentMediaType": "application/octet-stream",
                        "description": "The invoice as a file part: PDF, PNG, JPEG, TIFF or "
                        "XML (stored in the document store; the type is read from the bytes, "
                        "never the file name or part header: anything else is 415), or UTF-8 "
                        "OCR text (kept as a pasted text; also as a plain text field). At most "
                        "max_document_file_bytes (413).",
                    },
                    "metadata": {
                        "$ref": "#/components/schemas/JobOptions",
                        "description": "Optional: the JobOptions fields, as a JSON part.",
                    },
                },
            },
            "encoding": {"metadata": {"contentType": "application/json"}},
        },
    },
}


def register_routes(app: FastAPI) -> None:
    @app.post(
        "/v1/extraction-jobs",
        tags=["jobs"],
        summary="Accept an extraction job (durably, idempotently)",
        status_code=202,
        response_model=JobAccepted,
        responses={
            200: {
                "description": "Replay: the original receipt of the job this "
                "Idempotency-Key already names (its state as accepted)",
                "model": JobAccepted,
                "headers": _LOCATION,
            },
            202: {"description": "Accepted: job and outbox event committed", "headers": _LOCATION},
            **problem_responses(400, 401, 409, 413, 415, 422, 429, 503),
        },
        openapi_extra={
            "requestBody": _SUBMISSION_BODY,
            "parameters": [_IDEMPOTENCY_KEY_PARAMETER],
        },
    )
    async def create_job(request: Request, principal: Caller) -> Response:
        ctx = api_context(request)
        idempotency_key = request.headers.get("idempotency-key")
        # Observed by AcceptanceMiddleware once the response is sent; refusals made
        # before this route runs (401, 413, 422, 503) are classified there.
        timer = acceptance_timer(request.state)
        try:
            submission = await read_submission(
                request, ctx.settings.max_body_bytes, ctx.settings.max_document_file_bytes
            )
            receipt = await ctx.services.intake.submit(
                principal.tenant_id, submission, idempotency_key, api_key_id=principal.key_id
            )
        except AdmissionRejected as exc:
            timer.outcome, timer.reason = "rejected", exc.reason
            raise
        except IdempotencyConflict:
            timer.outcome, timer.reason = "conflict", "idempotency_conflict"
            raise
        except ApiProblem as exc:
            timer.outcome, timer.reason = "invalid", exc.reason or "invalid_request"
            raise
        except (RequestValidationError, StarletteHTTPException):
            timer.outcome, timer.reason = "invalid", "invalid_request"
            raise
        except DATABASE_UNAVAILABLE:
            timer.outcome, timer.reason = "rejected", "database_unavailable"
            raise
        timer.outcome = "accepted" if receipt.created else "replayed"
        body = receipt.body()
        return JSONResponse(
            body.model_dump(mode="json"),
            status_code=202 if receipt.created else 200,
            headers={"Location": body.status_url, "Idempotency-Key": receipt.idempotency_key},
        )

    @app.get(
        "/v1/extraction-jobs",
        tags=["jobs"],
        summary="List this tenant's jobs, newest first (keyset pagination)",
        response_model=JobPage,
        responses=problem_responses(400, 401, 422, 503),
    )
    async def list_jobs(
        request: Request,
        principal: Caller,
        state: JobState | None = None,
        cursor: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{1,400}$")] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
    ) -> JobPage:
        return await api_context(request).services.views.page(
            principal, state=state, cursor=cursor, limit=limit
        )

    @app.get(
        "/v1/extraction-jobs/{job_id}",
        tags=["jobs"],
        summary="Authoritative job state",
        response_model=JobStatus,
        responses=problem_responses(401, 404, 422, 503),
    )
    async def get_job(request: Request, principal: Caller, job_id: uuid.UUID) -> JobStatus:
        return await api_context(request).services.views.status(principal, job_id)

    @app.get(
        "/v1/extraction-jobs/{job_id}/result",
        tags=["jobs"],
        summary="The job's validated result (or the one awaiting review)",
        response_model=JobResult,
        responses=problem_responses(401, 404, 409, 410, 422, 503),
    )
    async def get_result(request: Request, principal: Caller, job_id: uuid.UUID) -> JobResult:
        return await api_context(request).services.views.result(principal, job_id)

    @app.post(
        "/v1/extraction-jobs/{job_id}/review",
        tags=["review"],
        summary="Approve or reject a job awaiting review",
        response_model=ReviewDecisionOut,
        responses=problem_responses(400, 401, 403, 404, 409, 413, 422, 503),
    )
    async def review_job(
        request: Request, principal: Caller, job_id: uuid.UUID, body: ReviewDecisionIn
    ) -> ReviewDecisionOut:
        return await api_context(request).services.review.decide(principal, job_id, body)

    @app.get(
        "/v1/extraction-jobs/{job_id}/events",
        tags=["events"],
        summary="Status events of one job (SSE); ends after a final state",
        response_class=StreamingResponse,
        responses={200: _SSE, **problem_responses(401, 404, 422, 503)},
    )
    async def job_events(
        request: Request,
        principal: Caller,
        job_id: uuid.UUID,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        ctx = api_context(request)
        await ctx.services.views.visible(principal, job_id)
        return await _stream(request, principal, job_id, last_event_id)

    @app.get(
        "/v1/events",
        tags=["events"],
        summary="Status events of every job of this tenant (SSE)",
        response_class=StreamingResponse,
        responses={200: _SSE, **problem_responses(401, 422, 503)},
    )
    async def tenant_events(
        request: Request,
        principal: Caller,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        return await _stream(request, principal, None, last_event_id)

    @app.get("/healthz", tags=["ops"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["ops"],
        summary="The database is reachable",
        responses=problem_responses(503),
    )
    async def readyz(request: Request) -> dict[str, str]:
        ctx = api_context(request)
        async with ctx.services.pool.acquire(
            timeout=ctx.settings.db_acquire_timeout_seconds
        ) as conn:
            await conn.fetchval(q("database_ping"))
        return {"status": "ready"}

    @app.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def metrics(request: Request) -> Response:
        return api_context(request).metrics.response()


async def _stream(
    request: Request, principal: Principal, job_id: uuid.UUID | None, last_event_id: str | None
) -> StreamingResponse:
    ctx = api_context(request)
    services = ctx.services
    stream = StatusStream(
        services.pool,
        await ctx.hub(),
        ctx.settings,
        tenant_id=principal.tenant_id,
        api_key=request.state.api_key,
        job_id=job_id,
        last_event_id=parse_last_event_id(last_event_id),
    )

    async def body() -> AsyncIterator[str]:
        ctx.metrics.streams.inc()
        try:
            async for chunk in stream.events():
                yield chunk
        finally:
            ctx.metrics.streams.dec()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
