"""How a browser authenticates to the console: an API key exchanged for a session.

A browser cannot attach ``Authorization: Bearer`` to a link or a form, and an API
key must never sit in a page, a URL or script-readable storage. So the login form
posts the key once; the server checks it, opens a **server-side session**
(:mod:`pipeline.tenants.sessions`: a row holding the sha256 of a random id) and
sets a cookie that holds only that id. Invariants:

* The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other
  site's page sends it), ``Path=/console``, and ``Secure`` whenever the browser
  spoke https: to this server, or to a trusted proxy that says so
  (:mod:`pipeline.api.client_origin`).
* A session ends on the server: logout deletes its row, revoking its key deletes
  the key's rows, and every request reads session and key again, so the old
  cookie is refused at once (issue 45, defect 5: a signed cookie outlived logout
  by up to 8 hours).
* Every state-changing request made with the cookie carries a **CSRF token**
  bound to the session (HMAC of its id) in a hidden form field, and any
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
import logging
import secrets
import time

from fastapi import Request
from fastapi.responses import Response

from pipeline.settings import Settings

log = logging.getLogger(__name__)

SESSION_COOKIE = "fenceline_console"
LOGIN_COOKIE = "fenceline_console_login"
COOKIE_PATH = "/console"
LOGIN_SECONDS = 600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _equal(presented: str, expected: str) -> bool:
    """Constant-time equality of a presented value with one this module issued (ASCII);
    False for a presented value outside ASCII, which none of ours is."""
    return presented.isascii() and hmac.compare_digest(presented, expected)


class FormSigner:
    """Signs and checks the console's CSRF tokens and login nonces with one key.

    The key only protects forms: sessions themselves live in the database, so an
    unset key (a random one per process) costs a reloaded form after a restart,
    never a session.
    """

    def __init__(self, settings: Settings) -> None:
        configured = settings.console_session_key
        if configured is None:
            log.warning(
                "FENCELINE_CONSOLE_SESSION_KEY is unset: console forms are signed with a "
                "per-process key, so a form loaded before a restart (or from another "
                "replica) must be loaded again"
            )
            self._key = secrets.token_bytes(32)
        else:
            raw = configured.get_secret_value().encode()
            if len(raw) < 32:
                raise ValueError("console_session_key must have at least 32 characters")
            self._key = hashlib.sha256(b"fenceline console session v1\x00" + raw).digest()

    def _mac(self, purpose: str, data: str) -> str:
        msg = f"{purpose}\x00{data}".encode()
        return _b64(hmac.new(self._key, msg, hashlib.sha256).digest())

    def csrf_token(self, session_id: str) -> str:
        """The token the forms of session ``session_id`` carry."""
        return self._mac("csrf", session_id)

    def csrf_ok(self, session_id: str, token: str | None) -> bool:
        return bool(token) and _equal(str(token), self.csrf_token(session_id))

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


def same_origin(request: Request, https: bool) -> bool:
    """False when the browser says the request comes from another origin. ``https``:
    whether the browser spoke https (behind a trusted TLS proxy the connection does not)."""
    origin = request.headers.get("origin")
    if origin is None:  # not every browser sends it; SameSite and the token still hold
        return True
    scheme = "https" if https else "http"
    return origin == f"{scheme}://{request.headers.get('host', request.url.netloc)}"


def set_cookie(response: Response, name: str, value: str, max_age: int, *, secure: bool) -> None:
    """Set a console cookie; ``secure``: the browser spoke https, so it sends it back only so."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure,
    )


def clear_cookie(response: Response, name: str, *, secure: bool) -> None:
    response.delete_cookie(
        name,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure,
    )
