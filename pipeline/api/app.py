"""The HTTP face of Fenceline: a FastAPI app factory.

:func:`create_app` builds the app that runs as the Ray Serve ingress
(``deployments/intake.py``) and, unchanged, under plain uvicorn
(``uvicorn --factory pipeline.api.app:app_from_env``). Routes only wire requests to
the services that hold the invariants:

* :mod:`pipeline.api.intake` — durable, idempotent acceptance (202 after commit);
  :mod:`pipeline.api.submission` — the request models and how a body becomes one;
* :mod:`pipeline.jobs.quotas` — admission before acceptance (429 / 503);
* :mod:`pipeline.api.job_views` — tenant-scoped reads (another tenant's job is 404);
* :mod:`pipeline.api.status_stream` — SSE status streams;
* :mod:`pipeline.api.review` — review decisions;
* :mod:`pipeline.api.endpoints` — the tenant's webhook endpoints (its own router);
* :mod:`pipeline.api.deliveries` — the tenant's delivery log and resends (its own router);
* :mod:`pipeline.api.redrive` — operator re-drive of FAILED_TERMINAL jobs (its own router);
* :mod:`pipeline.api.cancel` — cancellation of a tenant's unsettled jobs (its own router);
* :mod:`pipeline.api.erasure` — erasure of a job's content (its own router);
* :mod:`pipeline.api.problems` — every error as ``application/problem+json``,
  and 413 before a too-large body is buffered;
* :mod:`pipeline.api.headers` — 400 for a repeated ``Authorization``,
  ``Idempotency-Key``, ``Content-Type`` or ``Content-Length``;
* :mod:`pipeline.api.metrics` — ``/metrics``;
* :mod:`pipeline.api.console` — the review console and operator dashboard
  (server-rendered HTML under ``/console``, session cookie + CSRF, strict CSP).

Every ``/v1`` route authenticates ``Authorization: Bearer <key>`` and passes the
principal's tenant to a tenant-scoped query; the cross-tenant test enumerates
this app's route table, so a route added without that check fails it.

``fenceline api --write-openapi`` regenerates ``docs/openapi.json``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi

from pipeline.api import problems as api_errors
from pipeline.api.acknowledgements import router as acknowledgements_router
from pipeline.api.body_limit import BodyLimitMiddleware
from pipeline.api.cancel import router as cancel_router
from pipeline.api.console.routes import install_console
from pipeline.api.context import ApiContext, known_query_only
from pipeline.api.deliveries import router as deliveries_router
from pipeline.api.endpoints import router as endpoints_router
from pipeline.api.erasure import router as erasure_router
from pipeline.api.headers import SingleValuedHeadersMiddleware
from pipeline.api.heap import with_frozen_heap
from pipeline.api.intake import AcceptHook
from pipeline.api.metrics import AcceptanceMiddleware
from pipeline.api.problems import FieldError, Problem
from pipeline.api.redrive import router as redrive_router
from pipeline.api.request_options import describe_honoured_options
from pipeline.api.routes import register_routes
from pipeline.api.submission import JobOptions, JobSubmission
from pipeline.clock import Clock
from pipeline.jobs import SettleHook
from pipeline.settings import Settings

API_VERSION = "1.0.0"
OPENAPI_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
#: Room for the form around an uploaded file: boundaries, part headers, the metadata part.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


def _openapi(app: FastAPI, settings: Settings) -> dict[str, Any]:
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
    describe_honoured_options(components, settings)
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
            outcome this app commits — review decisions. The default (None) is the
            system's store, :func:`pipeline.delivery.job_store`, which creates the
            ERP deliveries of an approved job with its ``extraction.completed.v1``
            event, so no factory (Serve ingress, uvicorn) can forget them; tests
            may pass their own.
    """
    ctx = ApiContext(
        settings, pool=pool, accept_hook=accept_hook, clock=clock, settle_hooks=settle_hooks
    )

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
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        drain_bytes=settings.max_body_drain_bytes,
        drain_seconds=settings.body_drain_seconds,
        # A file upload: the file's own limit plus the form around it.
        upload_max_bytes=settings.max_document_file_bytes + MULTIPART_OVERHEAD_BYTES,
    )
    # Outside the body limit: an ambiguous request is refused before anything is read.
    app.add_middleware(
        SingleValuedHeadersMiddleware,
        max_headers=settings.http_max_headers,
        max_header_bytes=settings.http_max_header_bytes,
    )
    # Outermost (added last), so the 413s above are counted too.
    app.add_middleware(AcceptanceMiddleware, metrics=ctx.metrics)
    register_routes(app)
    install_console(app)

    app.include_router(endpoints_router)
    app.include_router(deliveries_router)
    app.include_router(redrive_router)
    app.include_router(cancel_router)
    app.include_router(erasure_router)
    app.include_router(acknowledgements_router)
    app.openapi = lambda: _openapi(app, settings)  # type: ignore[method-assign]
    return app


def app_from_env() -> FastAPI:
    """``uvicorn --factory pipeline.api.app:app_from_env``: settings from FENCELINE_*."""
    settings = Settings()
    return with_frozen_heap(create_app(settings), enabled=settings.freeze_heap_at_start)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app (no database needed)."""
    return create_app(Settings()).openapi()


def write_openapi(path: Path = OPENAPI_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n")
    return path
