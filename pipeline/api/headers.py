"""Request headers that must appear once: an ambiguous request is refused, not guessed.

Starlette's ``request.headers.get`` returns the *first* of repeated headers, and
a proxy in front may pick the last: two ``Authorization`` headers could then
authenticate as one tenant here and be logged as another there, two
``Idempotency-Key`` headers name two different jobs, and two ``Content-Type``
headers make the parser a guess. So a request carrying any of
:data:`SINGLE_VALUED` more than once is a 400 problem (reason
``duplicate_header``) naming the header, before authentication or any read,
and nothing is written.

``Content-Length`` together with ``Transfer-Encoding`` is the classic request
smuggling shape: two hops may frame the body differently. httptools (uvicorn's
default parser) refuses it before the app runs, in ``text/plain``; h11 passes
it on, framed by the chunked encoding. The app refuses it either way it sees
it: 400 ``ambiguous_framing`` (see ``docs/intake.md`` for what each server does
on its own).
"""

from __future__ import annotations

from collections import Counter

from starlette.types import ASGIApp, Receive, Scope, Send

from pipeline.api.problems import problem

#: Lower-case header name → the spelling used in the problem detail.
SINGLE_VALUED: dict[bytes, str] = {
    b"authorization": "Authorization",
    b"idempotency-key": "Idempotency-Key",
    b"content-type": "Content-Type",
    b"content-length": "Content-Length",
}


def repeated_header(scope: Scope) -> str | None:
    """The first single-valued header that ``scope`` carries more than once, if any."""
    counts = Counter(bytes(key).lower() for key, _ in scope.get("headers", ()))
    for name, spelling in SINGLE_VALUED.items():
        if counts[name] > 1:
            return spelling
    return None


def header_load(scope: Scope) -> tuple[int, int]:
    """How many headers ``scope`` carries and their bytes as sent (``name: value\\r\\n``)."""
    headers = scope.get("headers", ())
    return len(headers), sum(len(key) + len(value) + 4 for key, value in headers)


def has_both_framings(scope: Scope) -> bool:
    """Whether the request carries both ``Content-Length`` and ``Transfer-Encoding``."""
    names = {bytes(key).lower() for key, _ in scope.get("headers", ())}
    return b"content-length" in names and b"transfer-encoding" in names


class SingleValuedHeadersMiddleware:
    """431 for too many or too large headers; 400 for a repeated header of
    :data:`SINGLE_VALUED` or two body framings."""

    def __init__(self, app: ASGIApp, *, max_headers: int, max_header_bytes: int) -> None:
        self.app = app
        self.max_headers = max_headers
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            count, size = header_load(scope)
            if count > self.max_headers or size > self.max_header_bytes:
                response = problem(
                    431,
                    f"{count} headers of {size} bytes; at most {self.max_headers} "
                    f"headers of {self.max_header_bytes} bytes",
                    reason="headers_over_limit",
                    headers={"Connection": "close"},
                )
                await response(scope, receive, send)
                return
            name = repeated_header(scope)
            if name is not None:
                response = problem(
                    400,
                    f"the {name} header appears more than once; send it once",
                    reason="duplicate_header",
                )
                await response(scope, receive, send)
                return
            if has_both_framings(scope):
                response = problem(
                    400,
                    "Content-Length and Transfer-Encoding together frame the body ambiguously",
                    reason="ambiguous_framing",
                    # Never reuse a connection whose framing two hops may read differently.
                    headers={"Connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
