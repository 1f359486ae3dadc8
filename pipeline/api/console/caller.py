"""Who calls a console page: a Bearer key or a server-side session, and whether the
form it POSTs is its own.

Every console route starts here: :func:`console_caller` resolves the caller (the
session row and its key are read again on every request, so a logout or a revoked
key ends the session at once), :func:`checked_form` refuses a cookie-authenticated
POST without the session's CSRF token or from another origin, and
:class:`ConsoleRefusal` ends a request with an HTML page (401 → login, 403, 404; an
expired Bearer key is a 401 like a missing one, as on the REST routes). Form
signing is :mod:`pipeline.api.console.session`'s; the client's address and scheme
are :mod:`pipeline.api.client_origin`'s.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from pipeline.api.client_origin import ClientOrigin, TrustedProxies
from pipeline.api.console.session import SESSION_COOKIE, FormSigner, same_origin
from pipeline.api.context import api_context
from pipeline.api.login_limit import LoginLimiter, LoginLimits
from pipeline.errors import KeyExpired
from pipeline.tenants import Principal, authenticate, session_principal

#: What a caller whose key has expired reads (the sign-in form says the same).
EXPIRED_KEY = "That key has expired; ask for a new one."


class ConsoleRefusal(Exception):
    """Ends a console request with an HTML page (401 → login, 403, 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def signer(request: Request) -> FormSigner:
    ctx = api_context(request)
    if ctx.console_signer is None:
        ctx.console_signer = FormSigner(ctx.settings)
    return ctx.console_signer


def origin(request: Request) -> ClientOrigin:
    """The client's address and whether it spoke https (trusted proxies believed)."""
    ctx = api_context(request)
    if ctx.trusted_proxies is None:
        ctx.trusted_proxies = TrustedProxies.of(ctx.settings)
    return ctx.trusted_proxies.origin(request)


def login_limiter(request: Request) -> LoginLimiter:
    ctx = api_context(request)
    if ctx.console_login_limiter is None:
        s = ctx.settings
        ctx.console_login_limiter = LoginLimiter(
            LoginLimits(
                failures_per_address=s.console_login_failures_per_address,
                failures_per_address_key=s.console_login_failures_per_address_key,
                attempts_per_key=s.console_login_attempts_per_key,
                window_seconds=s.console_login_window_seconds,
            )
        )
    return ctx.console_login_limiter


async def console_caller(request: Request) -> Principal:
    """The caller: a Bearer key, or the key of a live session (both read again)."""
    ctx = api_context(request)
    pool = ctx.services.pool
    auth = request.headers.get("authorization", "")
    principal = None
    async with pool.acquire(timeout=ctx.settings.db_acquire_timeout_seconds) as conn:
        if auth.lower().startswith("bearer "):
            try:
                principal = await authenticate(conn, auth[7:].strip())
            except KeyExpired:
                # As on the REST routes (401 key_expired): refused, and told why.
                raise ConsoleRefusal(401, EXPIRED_KEY) from None
            request.state.console_bearer = principal is not None
        else:
            session_id = request.cookies.get(SESSION_COOKIE)
            principal = await session_principal(conn, session_id)
            if principal is not None:
                request.state.console_session = session_id
    if principal is None:
        raise ConsoleRefusal(401, "Sign in with an API key of your tenant.")
    return principal


def csrf_for(request: Request) -> str | None:
    session = getattr(request.state, "console_session", None)
    return None if session is None else signer(request).csrf_token(session)


async def checked_form(request: Request) -> dict[str, Any]:
    """The POSTed form, after the CSRF check a cookie-authenticated request needs."""
    form = await request.form()
    data: dict[str, Any] = {k: form.getlist(k) for k in form}
    if getattr(request.state, "console_bearer", False):
        return data
    session = getattr(request.state, "console_session", None)
    token = (data.get("csrf_token") or [None])[0]
    if (
        session is None
        or not same_origin(request, origin(request).https)
        or not signer(request).csrf_ok(session, token)
    ):
        raise ConsoleRefusal(403, "This form expired or did not come from this console.")
    return data


def need(principal: Principal, scopes: frozenset[str], what: str) -> None:
    if not scopes & principal.scopes:
        raise ConsoleRefusal(403, f"Your API key has no scope to {what}.")
