"""Every API error as ``application/problem+json`` (RFC 9457).

One place maps Fenceline's error hierarchy (:mod:`pipeline.errors`), Starlette's
HTTP errors and request validation onto problem documents, so no route invents
its own error shape and nothing a client sends can surface as a bare 500:

* :class:`~pipeline.errors.NotFound` → 404; another tenant's resource uses the
  same body as a missing one (no identifiers of the other tenant appear).
* :class:`~pipeline.errors.IdempotencyConflict` → 409.
* :class:`~pipeline.errors.AdmissionRejected` → 429 (tenant quota) or 503 (system
  capacity, database unavailable), always with ``Retry-After``.
* A lost or unreachable database → 503 with ``Retry-After``: accepted work is in
  PostgreSQL, so when it cannot be reached nothing can be accepted.
* Anything else → 500 with no internals in the body (logged server-side).

The request body's limit, which answers with these documents, is
:mod:`pipeline.api.body_limit`.
"""

from __future__ import annotations

import logging
import math
from http import HTTPStatus
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from pipeline.errors import (
    AdmissionRejected,
    DataKeyNotHere,
    DataKeyShredded,
    DataKeyUnavailable,
    DocumentOverLimit,
    IdempotencyConflict,
    NotFound,
)
from pipeline.text_safety import refuse_invisible, safe_text_pattern

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

#: Errors that mean "the database is unreachable right now", not "the request is bad".
DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InterfaceError,
)


class FieldError(BaseModel):
    """One validation failure; the offending input is deliberately not echoed."""

    loc: list[str | int]
    msg: str
    type: str


class DeliveryRef(BaseModel):
    """A delivery a problem concerns: its id (the ``webhook-id``) and its state."""

    id: str
    state: str


class Problem(BaseModel):
    """An RFC 9457 problem document, with Fenceline's extension members."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field("about:blank", description="URI reference naming the problem type.")
    title: str
    status: int = Field(ge=400, le=599)
    detail: str | None = None
    reason: str | None = Field(None, description="Machine-readable cause, e.g. quota_pending_jobs.")
    retry_after: int | None = Field(None, ge=1, description="Same as the Retry-After header.")
    job_id: str | None = Field(None, description="The caller's own job this problem concerns.")
    state: str | None = None
    state_version: int | None = None
    errors: list[FieldError] | None = None
    limit: str | None = Field(
        None,
        description="The document limit refused (reason document_over_limit): "
        "document_bytes, document_tokens, lines or line_chars.",
    )
    allowed: int | None = Field(None, description="The limit's configured value.")
    actual: int | None = Field(None, description="The document's value.")
    line: int | None = Field(None, description="The first line over line_chars (1-based).")
    deliveries: list[DeliveryRef] | None = Field(
        None,
        description="A settled job's deliveries (reason settled, on cancel): what its "
        "ERP endpoints may already have; a cancellation recalls nothing.",
    )


class ApiProblem(Exception):
    """Raised by routes for a problem that has no counterpart in :mod:`pipeline.errors`."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        reason: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.reason = reason
        self.headers = headers or {}
        self.extensions = extensions


#: What the OpenAPI document says of a stored human-readable field; the field's
#: ``pattern`` (:func:`safe_text_schema`) says it for the Basic Multilingual Plane.
UNSAFE_TEXT_NOTE = (
    "No control, bidi, zero-width or other invisible characters, above U+FFFF "
    "included (422 unsafe_text)."
)
#: The same for a note, which may span lines.
UNSAFE_NOTE_NOTE = (
    "May span lines (newline, tab); no other control, bidi, zero-width or invisible "
    "characters, above U+FFFF included (422 unsafe_text)."
)


def safe_text_schema(*, multiline: bool = False) -> dict[str, Any]:
    """The ``json_schema_extra`` documenting :func:`refuse_unsafe_text` on a field: its
    ``pattern`` refuses the rule's characters, so a schema-valid string is not refused."""
    return {"pattern": safe_text_pattern(multiline=multiline)}


def refuse_unsafe_text(where: str, text: str | None, *, multiline: bool = False) -> None:
    """:func:`pipeline.text_safety.refuse_invisible` as the API answers it.

    Every human-readable field the API stores or carries on passes here before it
    is written: a character a person cannot see for what it is (bidi control,
    zero-width, control; a newline or tab only where ``multiline``) is refused.

    Raises:
        ApiProblem: 422 ``unsafe_text``, naming the field and the code point
            (never echoing the text itself).
    """
    try:
        refuse_invisible(where, text, multiline=multiline)
    except ValueError as exc:
        raise ApiProblem(422, str(exc), reason="unsafe_text") from None


def retry_after_seconds(seconds: float) -> int:
    """Whole seconds for ``Retry-After``: never below 1, never fractional."""
    if not math.isfinite(seconds):
        return 3600
    return max(1, math.ceil(seconds))


def problem(
    status: int,
    detail: str | None = None,
    *,
    reason: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response; ``reason`` also names the problem ``type``."""
    body = Problem(
        type=f"urn:fenceline:problem:{reason}" if reason else "about:blank",
        title=_title(status),
        status=status,
        detail=detail,
        reason=reason,
        **extensions,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def rejection_response(exc: AdmissionRejected) -> JSONResponse:
    """429/503 with ``Retry-After`` in the header and the body."""
    seconds = retry_after_seconds(exc.retry_after)
    return problem(
        exc.status,
        str(exc),
        reason=exc.reason,
        retry_after=seconds,
        headers={"Retry-After": str(seconds)},
    )


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else None
    reason = "body_too_large" if isinstance(exc, BodyTooLarge) else None
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        # Starlette names only the first route matching the path; a path served by
        # several routes (GET and POST /v1/extraction-jobs) must list them all.
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem(exc.status_code, detail, reason=reason, headers=headers or None)


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def _on_validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        FieldError(
            loc=[p if isinstance(p, int) else str(p) for p in e.get("loc", ())],
            msg=str(e.get("msg", "invalid")),
            type=str(e.get("type", "value_error")),
        )
        for e in exc.errors()
    ]
    return problem(422, "the request is invalid", reason="invalid_request", errors=errors)


async def _on_api_problem(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiProblem)
    return problem(
        exc.status, exc.detail, reason=exc.reason, headers=exc.headers or None, **exc.extensions
    )


async def _on_not_found(_: Request, __: Exception) -> Response:
    # The same words whether the job is missing or belongs to another tenant.
    return problem(404, "no such resource", reason="not_found")


async def _on_conflict(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, IdempotencyConflict)
    return problem(
        409,
        "this Idempotency-Key was already used for a different request",
        reason="idempotency_conflict",
        job_id=exc.existing_job_id,
    )


async def _on_shredded(_: Request, exc: Exception) -> Response:
    # content sealed under a tenant data key that was destroyed (crypto-shredding)
    return problem(410, str(exc), reason="content_shredded")


async def _on_key_not_here(_: Request, exc: Exception) -> Response:
    # sealed content this process has no key-encryption key for: a deployment fault
    log.error("sealed content unreadable here: %s", exc)
    return problem(503, str(exc), reason="content_key_unavailable")


async def _on_key_unavailable(_: Request, exc: Exception) -> Response:
    # sealed content that does not authenticate (moved or altered) or has no data key
    log.error("sealed content does not open: %s", exc)
    return problem(500, str(exc), reason="content_unreadable")


async def _on_rejected(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, AdmissionRejected)
    return rejection_response(exc)


def database_unavailable(retry_after: float) -> AdmissionRejected:
    """The 503 used whenever PostgreSQL cannot be reached."""
    return AdmissionRejected(
        "the database is unavailable; nothing was accepted",
        status=503,
        reason="database_unavailable",
        retry_after=retry_after,
    )


def install(app: FastAPI, *, capacity_retry_after: float) -> None:
    """Register the problem handlers on ``app``."""

    async def on_database(_: Request, exc: Exception) -> Response:
        log.warning("database unavailable: %s", exc)
        return rejection_response(database_unavailable(capacity_retry_after))

    async def on_unexpected(_: Request, exc: Exception) -> Response:
        log.error("unhandled error", exc_info=exc)
        return problem(500, "internal error", reason="internal")

    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(ApiProblem, _on_api_problem)
    app.add_exception_handler(NotFound, _on_not_found)
    app.add_exception_handler(IdempotencyConflict, _on_conflict)
    app.add_exception_handler(AdmissionRejected, _on_rejected)
    app.add_exception_handler(DataKeyShredded, _on_shredded)
    app.add_exception_handler(DataKeyNotHere, _on_key_not_here)
    app.add_exception_handler(DataKeyUnavailable, _on_key_unavailable)
    for exc_type in DATABASE_UNAVAILABLE:
        app.add_exception_handler(exc_type, on_database)
    app.add_exception_handler(Exception, on_unexpected)


_DESCRIPTIONS = {
    400: "Malformed request (invalid UTF-8, malformed JSON, bad cursor or header)",
    401: "Missing, unknown, revoked or expired (reason key_expired) API key",
    403: "The API key lacks the scope this operation needs",
    404: "No such resource for this tenant (another tenant's looks the same)",
    409: "Conflict: Idempotency-Key reused for a different request, a stale state_version, "
    "or an approval of an invoice version another decision superseded first "
    "(reason version_conflict)",
    413: "Request body above the configured limit, or a document over its size limits "
    "(reason document_over_limit: bytes or estimated tokens; limit, allowed, actual)",
    410: "Gone: the job's result content was removed by retention (reason content_removed)",
    415: "Unsupported Content-Type",
    422: "The request is well-formed but invalid (schema, NUL characters, invisible or "
    "bidi characters in a file name or option key, an unknown option: reason "
    "unknown_option, an option value the deployment cannot honour: reason invalid_option, "
    "a model_policy naming no configured pool: reason unknown_model_policy, "
    "a document over its shape limits: reason document_over_limit, "
    "lines or characters on one line)",
    429: "Tenant quota exceeded; retry after Retry-After seconds",
    503: "System capacity exhausted or database unavailable; retry after Retry-After seconds",
}

_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying",
        "schema": {"type": "string", "pattern": "^[1-9][0-9]*$"},
    }
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for ``codes``, all problem+json."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        entry: dict[str, Any] = {
            "description": _DESCRIPTIONS.get(code, _title(code)),
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        if code in (429, 503):
            entry["headers"] = _RETRY_AFTER_HEADER
        out[code] = entry
    return out


class BodyTooLarge(StarletteHTTPException):
    """The body grew past the limit while being read."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


def over_limit_problem(exc: DocumentOverLimit, status: int = 413) -> ApiProblem:
    """A document over one of its limits, as every intake path answers it: reason
    ``document_over_limit`` with ``limit``, ``allowed``, ``actual`` (and ``line``)."""
    extensions: dict[str, Any] = {
        "limit": exc.limit,
        "allowed": exc.allowed,
        "actual": exc.actual,
    }
    if exc.line is not None:
        extensions["line"] = exc.line
    return ApiProblem(status, str(exc), reason="document_over_limit", **extensions)
