"""Signing in to the console and out of it: the sign-in form, the key check behind
the login throttle, and logout, which ends the session on the server.

The session itself (a row in PostgreSQL; the cookie holds only its random id) lives in
:mod:`pipeline.tenants.sessions`; cookies and form tokens in
:mod:`pipeline.api.console.session`.
"""

from __future__ import annotations

import logging
import math

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from pipeline.api.console.caller import (
    EXPIRED_KEY,
    ConsoleRefusal,
    checked_form,
    console_caller,
    login_limiter,
    origin,
    signer,
)
from pipeline.api.console.render import render
from pipeline.api.console.session import (
    LOGIN_COOKIE,
    LOGIN_SECONDS,
    SESSION_COOKIE,
    clear_cookie,
    same_origin,
    set_cookie,
)
from pipeline.api.context import api_context
from pipeline.errors import KeyExpired
from pipeline.tenants import authenticate, close_session, hash_key, open_session

log = logging.getLogger(__name__)

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("/login")
async def login_form(request: Request, error: str | None = None) -> Response:
    cookie, token = signer(request).login_nonce()
    response = render("login.html", title="Sign in", login_token=token, error=error)
    set_cookie(response, LOGIN_COOKIE, cookie, LOGIN_SECONDS, secure=origin(request).https)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    key, token = form.get("api_key"), form.get("login_token")
    s, client = signer(request), origin(request)
    if not same_origin(request, client.https) or not s.login_ok(
        request.cookies.get(LOGIN_COOKIE), str(token) if token else None
    ):
        raise ConsoleRefusal(403, "The sign-in form expired; load it again.")
    ctx = api_context(request)
    limiter = login_limiter(request)
    presented = key.strip() if isinstance(key, str) else ""
    digest = hash_key(presented) if presented else None
    wait = limiter.retry_after(client.address, presented, digest)
    if wait is not None:
        page = render(
            "error.html",
            429,
            title="Too many sign-in attempts",
            message=f"Too many sign-in attempts. Try again in {wait} seconds.",
        )
        page.headers["Retry-After"] = str(wait)
        return page
    session_id = None
    error = "That key is not valid."
    if presented:
        async with ctx.services.pool.acquire(
            timeout=ctx.settings.db_acquire_timeout_seconds
        ) as conn:
            try:
                principal = await authenticate(conn, presented)
            except KeyExpired:
                principal, error = None, EXPIRED_KEY
            if principal is not None:  # None: revoked or expired since it was verified
                session_id = await open_session(
                    conn, principal, ctx.settings.console_session_seconds
                )
    limiter.attempted(client.address, presented, digest, failed=session_id is None)
    if session_id is None:
        cookie, fresh = s.login_nonce()
        page = render("login.html", 401, title="Sign in", login_token=fresh, error=error)
        set_cookie(page, LOGIN_COOKIE, cookie, LOGIN_SECONDS, secure=client.https)
        return page
    response = RedirectResponse("/console/queue", status_code=303)
    lifetime = math.ceil(ctx.settings.console_session_seconds)
    set_cookie(response, SESSION_COOKIE, session_id, lifetime, secure=client.https)
    clear_cookie(response, LOGIN_COOKIE, secure=client.https)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session on the server (its row deleted: the cookie is refused from now
    on, wherever a copy of it is) and clear the cookie."""
    principal = await console_caller(request)
    await checked_form(request)
    session_id = getattr(request.state, "console_session", None)
    if session_id is not None:
        ctx = api_context(request)
        async with ctx.services.pool.acquire(
            timeout=ctx.settings.db_acquire_timeout_seconds
        ) as conn:
            if not await close_session(conn, principal.tenant_id, session_id):
                # Ended meanwhile (another tab's logout, its key revoked): already refused.
                log.info("console logout: the session had already ended")
    response = RedirectResponse("/console/login", status_code=303)
    clear_cookie(response, SESSION_COOKIE, secure=origin(request).https)
    return response
