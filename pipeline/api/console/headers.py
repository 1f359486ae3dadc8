"""Security headers on every console response (pages, fragments, assets, errors).

The console renders attacker-controlled text (OCR text and every extracted
value). Escaping is the first line; these headers are the second, so that a
missed escape still cannot run script or be framed:

* ``Content-Security-Policy``: scripts and styles only from this origin's
  ``/console/static`` files, never inline, no ``eval``; no plugins, no frames,
  forms post only here, no ``<base>`` rewriting;
* ``X-Frame-Options: DENY`` with ``frame-ancestors 'none'`` (clickjacking);
* ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin`` (job ids
  in URLs never leave this site; ``no-referrer`` would make Chromium send
  ``Origin: null`` on our own form posts, which the CSRF check refuses),
  ``Cache-Control: no-store`` (invoices stay out of caches),
  ``Cross-Origin-Opener-Policy: same-origin``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONSOLE_PREFIX = "/console"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class ConsoleHeadersMiddleware:
    """Adds :data:`SECURITY_HEADERS` to every response under ``/console``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (
            path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")
        ):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = headers + list(SECURITY_HEADERS)
            await send(message)

        await self.app(scope, receive, with_headers)
