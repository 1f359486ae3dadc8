"""The request body's size limit as ASGI middleware: 413 decided before the body is
buffered, answered as a problem document (:mod:`pipeline.api.problems`).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.api.problems import BodyTooLarge, problem


class BodyLimitMiddleware:
    """413 for bodies over ``max_bytes``, decided before the body is buffered.

    A declared ``Content-Length`` over the limit is refused without buffering a
    byte; otherwise (chunked or lying clients) the bytes are counted as they are
    received and the app sees nothing past the first chunk over the limit.

    Answering and closing while the client is still sending makes the kernel
    reset the connection, and a reset can destroy the 413 before the client
    reads it. So the rest of a refused body is read and discarded first, up to
    ``drain_bytes`` in all and ``drain_seconds``; a body that ends within both
    gets its 413 on a connection that stays usable, one that does not gets the
    413 with ``Connection: close`` (bounded work: the server never reads an
    unbounded body to be polite). A client that sent ``Expect: 100-continue``
    has sent no body yet and gets the 413 at once.

    A file upload (``multipart/form-data`` to ``upload_path``) may be larger: up to
    ``upload_max_bytes`` (the file limit and the form's overhead); the file itself is
    then held to its own limit by the intake.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        drain_bytes: int = 8 << 20,
        drain_seconds: float = 10.0,
        *,
        upload_max_bytes: int | None = None,
        upload_path: str = "/v1/extraction-jobs",
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.drain_bytes = drain_bytes
        self.drain_seconds = drain_seconds
        self.upload_max_bytes = max(upload_max_bytes or 0, max_bytes)
        self.upload_path = upload_path

    def limit_for(self, scope: Scope) -> int:
        """The body limit of this request: larger for a file upload to ``upload_path``."""
        media = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if (
            scope.get("method") == "POST"
            and scope.get("path") == self.upload_path
            and media == "multipart/form-data"
        ):
            return self.upload_max_bytes
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.isdigit():
                bad = problem(400, "invalid Content-Length", reason="invalid_content_length")
                await bad(scope, receive, send)
                return
            if int(declared) > limit:
                expects = (_header(scope, b"expect") or "").lower() == "100-continue"
                drained = False
                if not expects and int(declared) <= self.drain_bytes:
                    drained = await self._drain(receive, 0)
                await self._too_large(scope, receive, send, limit, drained=drained)
                return
        seen = 0
        ended = False
        started = False

        async def counted() -> Message:
            nonlocal seen, ended
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                ended = not message.get("more_body", False)
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
                if message["status"] == 413 and not ended:
                    # The app answered 413 to a body it stopped reading (its own
                    # handler of BodyTooLarge, or the multipart parser's limit).
                    ended = await self._drain(receive, seen)
                    if not ended:
                        message = {
                            **message,
                            "headers": [*message.get("headers", []), (b"connection", b"close")],
                        }
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if started:
                raise
            drained = ended or await self._drain(receive, seen)
            await self._too_large(scope, receive, send, limit, drained=drained)

    async def _drain(self, receive: Receive, already: int) -> bool:
        """Read and drop the rest of the body; True if it ended within the bounds."""
        total = already
        try:
            async with asyncio.timeout(self.drain_seconds):
                while total <= self.drain_bytes:
                    message = await receive()
                    if message["type"] != "http.request":
                        return False  # the client went away
                    total += len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return total <= self.drain_bytes
        except TimeoutError:
            return False
        return False

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, limit: int, *, drained: bool
    ) -> None:
        response = problem(
            413,
            f"the request body is larger than {limit} bytes",
            reason="body_too_large",
            headers=None if drained else {"Connection": "close"},
        )
        await response(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None
