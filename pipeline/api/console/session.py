"""How a browser authenticates to the console: an API key exchanged for a session.

A browser cannot attach ``Authorization: Bearer`` to a link or a form, and an API
key must never sit in a page, a URL or script-readable storage. So the login form
posts the key once; the server checks it and sets a **session cookie** that holds
no secret: the key's *id*, the tenant, an expiry and a random nonce, signed with
HMAC-SHA256 (``console_session_key``). Invariants:

* The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other
  site's page sends it), ``Path=/console`` and ``Secure`` over https.
* Every request reads the key again by id (:func:`pipeline.tenants.principal_for_key_id`):
  a revoked key ends its sessions at once, and scopes are always the key's current ones.
* Every state-changing request made with the cookie carries a **CSRF token**
  bound to the session (HMAC of its nonce) in a hidden form field, and any
  ``Origin`` it sends must be this site's. The login form has its own token bound
  to a short-lived pre-session cookie (login CSRF).
* A Bearer key works on console routes too (scripts, the cross-tenant matrix);
  such a request needs no CSRF token, since no browser attaches it on its own.
* Cookies and tokens are client text: every comparison goes through
  :func:`_equal`, which answers False for anything but ASCII (what this module
  issues) instead of letting ``hmac.compare_digest`` raise on it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from pipeline.settings import Settings

log = logging.getLogger(__name__)

SESSION_COOKIE = "fenceline_console"
LOGIN_COOKIE = "fenceline_console_login"
COOKIE_PATH = "/console"
LOGIN_SECONDS = 600


@dataclass(frozen=True)
class Session:
    """A verified console session (what the signed cookie says)."""

    key_id: uuid.UUID
    tenant_id: uuid.UUID
    expires: int
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _equal(presented: str, expected: str) -> bool:
    """Constant-time equality of a presented value with one this module issued (ASCII);
    False for a presented value outside ASCII, which none of ours is."""
    return presented.isascii() and hmac.compare_digest(presented, expected)


class SessionSigner:
    """Signs and verifies session cookies and CSRF tokens with one key."""

    def __init__(self, settings: Settings) -> None:
        configured = settings.console_session_key
        if configured is None:
            log.warning(
                "FENCELINE_CONSOLE_SESSION_KEY is unset: console sessions use a per-process "
                "key and end when this process restarts"
            )
            self._key = secrets.token_bytes(32)
        else:
            raw = configured.get_secret_value().encode()
            if len(raw) < 32:
                raise ValueError("console_session_key must have at least 32 characters")
            self._key = hashlib.sha256(b"fenceline console session v1\x00" + raw).digest()
        self.lifetime = int(settings.console_session_seconds)

    def _mac(self, purpose: str, data: str) -> str:
        msg = f"{purpose}\x00{data}".encode()
        return _b64(hmac.new(self._key, msg, hashlib.sha256).digest())

    def issue(self, key_id: uuid.UUID, tenant_id: uuid.UUID, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.lifetime)
        payload = json.dumps(
            {"k": str(key_id), "t": str(tenant_id), "e": expires, "n": secrets.token_urlsafe(16)},
            separators=(",", ":"),
        )
        body = _b64(payload.encode())
        return f"{body}.{self._mac('session', body)}"

    def verify(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session a cookie proves, or None (missing, forged, malformed, expired)."""
        if not cookie or len(cookie) > 1000 or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        if not _equal(mac, self._mac("session", body)):
            return None
        try:
            data: dict[str, Any] = json.loads(_unb64(body))
            session = Session(
                key_id=uuid.UUID(data["k"]),
                tenant_id=uuid.UUID(data["t"]),
                expires=int(data["e"]),
                nonce=str(data["n"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires <= (time.time() if now is None else now):
            return None
        return session

    def csrf_token(self, session: Session) -> str:
        return self._mac("csrf", session.nonce)

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return bool(token) and _equal(str(token), self.csrf_token(session))

    def login_nonce(self) -> tuple[str, str]:
        """A pre-session cookie value and the login form's token bound to it."""
        expires = int(time.time()) + LOGIN_SECONDS
        body = f"{secrets.token_urlsafe(16)}:{expires}"
        return f"{body}.{self._mac('login', body)}", self._mac("login-form", body)

    def login_ok(self, cookie: str | None, token: str | None) -> bool:
        if not cookie or not token or cookie.count(".") != 1:
            return False
        body, mac = cookie.split(".")
        if not _equal(mac, self._mac("login", body)):
            return False
        try:
            expires = int(body.rsplit(":", 1)[1])
        except (IndexError, ValueError):
            return False
        return expires > time.time() and _equal(str(token), self._mac("login-form", body))


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin."""
    origin = request.headers.get("origin")
    if origin is None:  # not every browser sends it; SameSite and the token still hold
        return True
    own = f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
    return origin == own


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(
        name,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
