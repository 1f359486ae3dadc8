"""The HTTP face of Fenceline: a FastAPI app factory.

:func:`create_app` builds the app that runs as the Ray Serve ingress
(``deployments/intake.py``) and, unchanged, under plain uvicorn
(``uvicorn --factory pipeline.api.app:app_from_env``). Routes only wire requests to
the services that hold the invariants:

* :mod:`pipeline.api.intake` — durable, idempotent acceptance (202 after commit);
* :mod:`pipeline.tenants.quotas` — admission before acceptance (429 / 503);
* :mod:`pipeline.api.job_views` — tenant-scoped reads (another tenant's job is 404);
* :mod:`pipeline.api.status_stream` — SSE status streams;
* :mod:`pipeline.api.review` — review decisions;
* :mod:`pipeline.api.endpoints` — the tenant's webhook endpoints (its own router);
* :mod:`pipeline.api.problems` — every error as ``application/problem+json``,
  and 413 before a too-large body is buffered;
* :mod:`pipeline.api.metrics` — ``/metrics``.

Every ``/v1`` route authenticates ``Authorization: Bearer <key>`` and passes the
principal's tenant to a tenant-scoped query; the cross-tenant test enumerates
this app's route table, so a route added without that check fails it.

``python -m pipeline.api.app --write-openapi`` regenerates ``docs/openapi.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, FastAPI, Header, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipeline.api import problems as api_errors
from pipeline.api.intake import (
    IDEMPOTENCY_KEY_PATTERN,
    AcceptHook,
    IntakeService,
    JobAccepted,
    JobOptions,
    JobSubmission,
    read_submission,
)
from pipeline.api.job_views import JobPage, JobResult, JobStatus, JobViews
from pipeline.api.metrics import AcceptanceMiddleware, IntakeMetrics, acceptance_timer
from pipeline.api.problems import (
    DATABASE_UNAVAILABLE,
    ApiProblem,
    BodyLimitMiddleware,
    FieldError,
    Problem,
    problem_responses,
)
from pipeline.api.review import ReviewDecisionIn, ReviewDecisionOut, ReviewService
from pipeline.api.status_stream import SSE_EVENTS, EventHub, StatusStream, parse_last_event_id
from pipeline.clock import Clock
from pipeline.database import create_pool
from pipeline.delivery.deliveries import delivery_settle_hook
from pipeline.errors import AdmissionRejected, IdempotencyConflict
from pipeline.jobs.store import JobStore, SettleHook
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants.accounts import Principal, authenticate
from pipeline.tenants.quotas import Admission

API_VERSION = "1.0.0"
#: Settle hooks every app gets unless told otherwise: a review approval creates
#: its ERP deliveries in the transaction of its completion event.
DEFAULT_SETTLE_HOOKS: tuple[SettleHook, ...] = (delivery_settle_hook,)
OPENAPI_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="A tenant API key (`flk_...`), created with the fenceline CLI.",
)

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


@dataclass
class Services:
    """Everything the routes use, built once the pool exists."""

    pool: asyncpg.Pool
    store: JobStore
    admission: Admission
    intake: IntakeService
    views: JobViews
    review: ReviewService
    hub: EventHub


class ApiContext:
    """The app's state: settings, metrics, and the services once a pool exists."""

    def __init__(
        self,
        settings: Settings,
        *,
        pool: asyncpg.Pool | None,
        accept_hook: AcceptHook | None,
        clock: Clock | None,
        settle_hooks: Sequence[SettleHook] = (),
    ) -> None:
        self.settings = settings
        self.metrics = IntakeMetrics()
        self.accept_hook = accept_hook
        self.clock = clock
        self.settle_hooks = list(settle_hooks)
        self.owns_pool = pool is None
        self._services: Services | None = self._build(pool) if pool is not None else None
        self._hub_started = False

    def _build(self, pool: asyncpg.Pool) -> Services:
        s = self.settings
        store = JobStore(pool, s, clock=self.clock)
        store.settle_hooks.extend(self.settle_hooks)
        admission = Admission(s, clock=self.clock)
        return Services(
            pool=pool,
            store=store,
            admission=admission,
            intake=IntakeService(pool, store, admission, s, accept_hook=self.accept_hook),
            views=JobViews(pool, s),
            review=ReviewService(pool, store, s),
            hub=EventHub(pool, s),
        )

    @property
    def services(self) -> Services:
        if self._services is None:
            raise api_errors.database_unavailable(self.settings.capacity_retry_after_seconds)
        return self._services

    async def startup(self) -> None:
        if self._services is None:
            # min_size=0: the app starts (and /healthz answers) even while the
            # database is down; requests then get 503 until it is back.
            pool = await create_pool(
                self.settings.database_url, min_size=0, max_size=self.settings.db_pool_max
            )
            self._services = self._build(pool)

    async def hub(self) -> EventHub:
        services = self.services
        if not self._hub_started:
            self._hub_started = True
            await services.hub.start()
        return services.hub

    async def shutdown(self) -> None:
        if self._services is None:
            return
        if self._hub_started:
            await self._services.hub.stop()
            self._hub_started = False
        if self.owns_pool:
            await self._services.pool.close()
            self._services = None


def _ctx(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.fenceline
    return ctx


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Principal:
    """The caller's principal; 401 for a missing, unknown or revoked key."""
    unauthorised = ApiProblem(
        401,
        "a valid API key is required",
        reason="unauthorized",
        headers={"WWW-Authenticate": "Bearer"},
    )
    if credentials is None:
        raise unauthorised
    ctx = _ctx(request)
    pool = ctx.services.pool
    async with pool.acquire(timeout=ctx.settings.db_acquire_timeout_seconds) as conn:
        principal = await authenticate(conn, credentials.credentials)
    if principal is None:
        raise unauthorised
    request.state.api_key = credentials.credentials
    return principal


Caller = Annotated[Principal, Depends(authenticated)]


async def known_query_only(request: Request) -> None:
    """422 for query parameters the route does not declare (typos must not pass silently)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.url.path.startswith("/v1/"):
        return
    declared = {p.alias for p in _all_query_params(dependant)}
    unknown = sorted(set(request.query_params.keys()) - declared)
    if unknown:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": "unknown query parameter",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )


def _all_query_params(dependant: Any) -> list[Any]:
    params = list(dependant.query_params)
    for sub in dependant.dependencies:
        params += _all_query_params(sub)
    return params


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
                        "contentMediaType": "text/plain",
                        "description": "The OCR text as a file part (or text field), UTF-8.",
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


def _register_routes(app: FastAPI) -> None:
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
        openapi_extra={"requestBody": _SUBMISSION_BODY},
    )
    async def create_job(
        request: Request,
        principal: Caller,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                # Documented, not enforced here: pipeline.api.intake answers a malformed
                # key with its 400 problem (a FastAPI pattern would make it a 422).
                json_schema_extra={"pattern": IDEMPOTENCY_KEY_PATTERN},
                description="Unique per tenant. Same key + same request → same job "
                "(202, then 200 with the original receipt); same key + different "
                "request → 409; a malformed key → 400. Without it the server generates "
                "a key, and a retried request becomes a second job.",
            ),
        ] = None,
    ) -> Response:
        ctx = _ctx(request)
        # Observed by AcceptanceMiddleware once the response is sent; refusals made
        # before this route runs (401, 413, 422, 503) are classified there.
        timer = acceptance_timer(request.state)
        try:
            submission = await read_submission(request, ctx.settings.max_body_bytes)
            receipt = await ctx.services.intake.submit(
                principal.tenant_id, submission, idempotency_key
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
        return await _ctx(request).services.views.page(
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
        return await _ctx(request).services.views.status(principal, job_id)

    @app.get(
        "/v1/extraction-jobs/{job_id}/result",
        tags=["jobs"],
        summary="The job's validated result (or the one awaiting review)",
        response_model=JobResult,
        responses=problem_responses(401, 404, 409, 422, 503),
    )
    async def get_result(request: Request, principal: Caller, job_id: uuid.UUID) -> JobResult:
        return await _ctx(request).services.views.result(principal, job_id)

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
        return await _ctx(request).services.review.decide(principal, job_id, body)

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
        ctx = _ctx(request)
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
        ctx = _ctx(request)
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
        return _ctx(request).metrics.response()


async def _stream(
    request: Request, principal: Principal, job_id: uuid.UUID | None, last_event_id: str | None
) -> StreamingResponse:
    ctx = _ctx(request)
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


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (Problem, FieldError, JobSubmission, JobOptions):
        defs = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in defs.pop("$defs", {}).items():
            components.setdefault(name, sub)
        components[model.__name__] = defs
    app.openapi_schema = schema
    return schema


def create_app(
    settings: Settings,
    *,
    pool: asyncpg.Pool | None = None,
    accept_hook: AcceptHook | None = None,
    clock: Clock | None = None,
    settle_hooks: Sequence[SettleHook] | None = None,
) -> FastAPI:
    """The Fenceline API.

    Args:
        settings: validated configuration.
        pool: an existing asyncpg pool (tests share theirs); without one the app
            creates its own at startup and closes it at shutdown.
        accept_hook: test seam run inside the accept transaction before commit
            (see :data:`pipeline.api.intake.AcceptHook`).
        clock: injectable time for the job store and admission.
        settle_hooks: the job store's settle hooks, run in the transaction of every
            outcome this app commits — review decisions. The default,
            :data:`DEFAULT_SETTLE_HOOKS`, creates the ERP deliveries of an approved
            job with its ``extraction.completed.v1`` event, so no factory (Serve
            ingress, uvicorn) can forget them; tests may pass their own.
    """
    hooks = DEFAULT_SETTLE_HOOKS if settle_hooks is None else settle_hooks
    ctx = ApiContext(settings, pool=pool, accept_hook=accept_hook, clock=clock, settle_hooks=hooks)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await ctx.startup()
        try:
            yield
        finally:
            await ctx.shutdown()

    app = FastAPI(
        title="Fenceline intake API",
        version=API_VERSION,
        description=(
            "Durable asynchronous invoice extraction. `POST /v1/extraction-jobs` returns "
            "202 once the job and its outbox event are committed; poll the status URL or "
            "follow its events. Errors are application/problem+json."
        ),
        lifespan=lifespan,
        dependencies=[Depends(known_query_only)],
    )
    app.state.fenceline = ctx
    api_errors.install(app, capacity_retry_after=settings.capacity_retry_after_seconds)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    # Outermost (added last), so the 413s above are counted too.
    app.add_middleware(AcceptanceMiddleware, metrics=ctx.metrics)
    _register_routes(app)
    from pipeline.api.endpoints import router as endpoints_router  # it imports this module

    app.include_router(endpoints_router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def app_from_env() -> FastAPI:
    """``uvicorn --factory pipeline.api.app:app_from_env``: settings from FENCELINE_*."""
    return create_app(Settings())


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app (no database needed)."""
    return create_app(Settings()).openapi()


def write_openapi(path: Path = OPENAPI_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.api.app")
    parser.add_argument("--write-openapi", nargs="?", const=str(OPENAPI_PATH), default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.write_openapi:
        print(write_openapi(Path(args.write_openapi)))
        return
    import uvicorn

    uvicorn.run(app_from_env(), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
