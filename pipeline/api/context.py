"""The API's state and its request dependencies: the services a route uses, and
who is calling (``Authorization: Bearer <key>``, 401 otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pipeline.api import problems as api_errors
from pipeline.api.client_origin import TrustedProxies
from pipeline.api.console.page_view import PageFiles
from pipeline.api.console.session import FormSigner
from pipeline.api.console.views import ConsoleViews
from pipeline.api.corrections import CorrectionService
from pipeline.api.intake import (
    AcceptHook,
    IntakeService,
)
from pipeline.api.job_views import JobViews
from pipeline.api.key_cache import KeyCache
from pipeline.api.login_limit import LoginLimiter
from pipeline.api.metrics import IntakeMetrics
from pipeline.api.problems import (
    ApiProblem,
)
from pipeline.api.review import ReviewService
from pipeline.api.status_stream import EventHub
from pipeline.api.warm_up import warm_pool
from pipeline.clock import Clock
from pipeline.database import create_pool
from pipeline.delivery import job_store
from pipeline.documents import DocumentStore, open_document_store
from pipeline.errors import KeyExpired
from pipeline.jobs import JobStore, SettleHook, TenantQuota
from pipeline.settings import Settings
from pipeline.tenants import Principal, key_digest, verify_key

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="A tenant API key (`flk_...`), created with the fenceline CLI.",
)


async def open_pool(settings: Settings) -> asyncpg.Pool:
    """The intake's pool, its ``db_pool_min`` connections open before the first request.

    A burst's first requests would otherwise each open a connection (a server
    process, authentication, the type codecs) inside their accept transaction. With
    the database down the app still starts (and /healthz answers) on an empty pool;
    requests then get 503 until it is back.
    """
    size = min(settings.db_pool_min, settings.db_pool_max)
    try:
        return await create_pool(
            settings.database_url, min_size=size, max_size=settings.db_pool_max
        )
    except (OSError, asyncpg.PostgresError):
        return await create_pool(settings.database_url, min_size=0, max_size=settings.db_pool_max)


@dataclass
class Services:
    """Everything the routes use, built once the pool exists."""

    pool: asyncpg.Pool
    store: JobStore
    admission: TenantQuota
    intake: IntakeService
    views: JobViews
    review: ReviewService
    corrections: CorrectionService
    console: ConsoleViews
    pages: PageFiles
    hub: EventHub
    #: The document store (an erasure removes a file from it).
    documents: DocumentStore


class ApiContext:
    """The app's state: settings, metrics, and the services once a pool exists."""

    def __init__(
        self,
        settings: Settings,
        *,
        pool: asyncpg.Pool | None,
        accept_hook: AcceptHook | None,
        clock: Clock | None,
        settle_hooks: Sequence[SettleHook] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = IntakeMetrics()
        self.accept_hook = accept_hook
        self.clock = clock
        self.settle_hooks = None if settle_hooks is None else list(settle_hooks)
        self.owns_pool = pool is None
        self._services: Services | None = self._build(pool) if pool is not None else None
        self._hub_started = False
        #: Built on first use, so an app that never serves the console never logs
        #: the missing-session-key warning.
        self.console_signer: FormSigner | None = None
        self.console_login_limiter: LoginLimiter | None = None
        self.trusted_proxies: TrustedProxies | None = None
        #: Verified keys (pipeline.api.key_cache); started with the app's lifespan, so
        #: an app run without one (most tests) reads every key from the database.
        self.key_cache: KeyCache | None = None

    def _build(self, pool: asyncpg.Pool) -> Services:
        s = self.settings
        if self.settle_hooks is None:  # the system's store: approvals create deliveries
            store = job_store(pool, s, clock=self.clock)
        else:
            store = JobStore(pool, s, clock=self.clock)
            store.settle_hooks.extend(self.settle_hooks)
        admission = TenantQuota(s, clock=self.clock)
        documents = open_document_store(s)
        return Services(
            pool=pool,
            store=store,
            admission=admission,
            intake=IntakeService(
                pool,
                store,
                admission,
                s,
                documents=documents,
                accept_hook=self.accept_hook,
            ),
            views=JobViews(pool, s, keys=store.data_keys),
            review=ReviewService(pool, store, s),
            corrections=CorrectionService(pool, store, s, clock=self.clock),
            console=ConsoleViews(pool, store, s),
            pages=PageFiles(pool, documents, s),
            hub=EventHub(pool, s),
            documents=documents,
        )

    @property
    def services(self) -> Services:
        if self._services is None:
            raise api_errors.database_unavailable(self.settings.capacity_retry_after_seconds)
        return self._services

    async def startup(self) -> None:
        if self._services is None:
            pool = await open_pool(self.settings)
            self._services = self._build(pool)
            await warm_pool(pool, self._services.intake, self.settings)
        if self.key_cache is None and self.settings.api_key_cache_size > 0:
            cache = KeyCache(
                self.settings.database_url,
                max_entries=self.settings.api_key_cache_size,
                max_age_seconds=self.settings.api_key_cache_seconds,
            )
            await cache.start()  # a database that is down: it keeps trying, reads bypass
            self.key_cache = cache

    async def hub(self) -> EventHub:
        services = self.services
        if not self._hub_started:
            self._hub_started = True
            await services.hub.start()
        return services.hub

    async def shutdown(self) -> None:
        if self.key_cache is not None:
            await self.key_cache.stop()
            self.key_cache = None
        if self._services is None:
            return
        if self._hub_started:
            await self._services.hub.stop()
            self._hub_started = False
        if self.owns_pool:
            await self._services.pool.close()
            self._services = None


def api_context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.fenceline
    return ctx


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Principal:
    """The caller's principal; 401 for a missing, unknown or revoked key, or an expired
    one (reason ``key_expired``, so its holder knows to fetch the rotated key)."""
    if credentials is None:
        raise _unauthorised()
    ctx = api_context(request)
    pool = ctx.services.pool
    now = ctx.clock.now() if ctx.clock is not None else None
    presented = credentials.credentials
    digest = key_digest(presented)
    cache = ctx.key_cache if digest is not None else None
    ticket = None
    if cache is not None and digest is not None:
        cached = cache.get(digest, now or datetime.now(UTC))
        if cached is not None:
            request.state.api_key = presented
            return cached
        ticket = cache.ticket()  # before the read: a change during it voids the fill
    try:
        async with pool.acquire(timeout=ctx.settings.db_acquire_timeout_seconds) as conn:
            verified = await verify_key(conn, presented, now=now)
    except KeyExpired:
        raise ApiProblem(
            401,
            "this API key has expired; use its replacement",
            reason="key_expired",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        ) from None
    if verified is None:
        raise _unauthorised()
    if cache is not None and digest is not None:
        cache.put(ticket, digest, verified)
    request.state.api_key = presented
    return verified.principal


def _unauthorised() -> ApiProblem:
    return ApiProblem(
        401,
        "a valid API key is required",
        reason="unauthorized",
        headers={"WWW-Authenticate": "Bearer"},
    )


Caller = Annotated[Principal, Depends(authenticated)]


async def known_query_only(request: Request) -> None:
    """422 for query parameters the route does not declare (typos must not pass silently)."""
    if not request.scope.get("query_string"):
        return  # nothing to check: the common case (every POST of a job) costs one lookup
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
