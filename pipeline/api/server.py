"""The HTTP server's own limits: how big a request head may be and how long a client
may take to send it (issue 45, defect 2).

uvicorn's httptools protocol buffers a request head of any size (16 and 64 MiB
headers were answered 200) and waits for it, or for a stalled body, for ever: a
handful of slow clients can hold every connection and a few large heads the
memory. :class:`BoundedHttpToolsProtocol` adds the bounds where the bytes arrive,
before the app runs:

* the request line (method, target, version) over ``http_max_request_line_bytes``
  is a 414, checked as the target arrives;
* the head (request line and headers) over ``http_max_header_bytes`` is a 431,
  counted per read, so at most one read (256 KiB) past the bound is buffered;
* a head not complete ``http_header_timeout_seconds`` seconds after the connection opened or
  the request's first byte is a 408;
* a body that goes ``http_body_idle_seconds`` seconds without a byte while the server waits
  for it (reading not paused by the app) closes the connection; the app sees
  ``http.disconnect``.

Each refusal is ``text/plain`` with ``Connection: close`` (the app never ran, so it
cannot be a problem document). The header *count* and a head that slipped past
the per-read count are checked again in the app by
:class:`pipeline.api.headers.SingleValuedHeadersMiddleware`, which also holds
under servers this module does not configure (the Ray Serve proxy).

:func:`server_config` is the one way Fenceline builds a uvicorn config
(``fenceline api``, tests); plain ``uvicorn --factory`` gets the default limits
with ``--http pipeline.api.server:BoundedHttpToolsProtocol``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from http import HTTPStatus
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pipeline.settings import Settings

_DEFAULTS = Settings.model_fields


@dataclasses.dataclass(frozen=True)
class HttpLimits:
    """The bounds one server applies: the settings of those names, with their defaults."""

    http_max_request_line_bytes: int = _DEFAULTS["http_max_request_line_bytes"].default
    http_max_header_bytes: int = _DEFAULTS["http_max_header_bytes"].default
    http_header_timeout_seconds: float = _DEFAULTS["http_header_timeout_seconds"].default
    http_body_idle_seconds: float = _DEFAULTS["http_body_idle_seconds"].default

    @classmethod
    def of(cls, settings: Settings) -> HttpLimits:
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`HttpLimits` (see the module docstring).

    The head is "open" from the connection's start, and again from each request's
    end, until that request's headers are complete; the body is "open" from then
    until the request's last byte.
    """

    limits: ClassVar[HttpLimits] = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = True
        self._body_open = False
        self._head_bytes = 0
        self._steps = 0  # head/body transitions, to tell whether a read spans two
        self._refused = False
        self._last_data = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- connection
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.http_header_timeout_seconds, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._last_data = self.loop.time()
        steps = self._steps
        super().data_received(data)
        if self._refused or self.transport.is_closing():
            return
        if self._head_open and self._steps == steps:
            # The whole read belongs to one head (a read that also ended a request
            # is left uncounted: at most one read past the bound).
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.http_max_header_bytes:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        elif self._body_open and self._timer is None:
            self._arm(self.limits.http_body_idle_seconds, self._body_idle_check)

    # -- parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._timer is None:
            self._arm(self.limits.http_header_timeout_seconds, self._head_timed_out)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.http_max_request_line_bytes and not self._refused:
            self._refuse(HTTPStatus.REQUEST_URI_TOO_LONG)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._refused:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._head_open, self._body_open, self._head_bytes = False, True, 0
        self._steps += 1
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._head_open, self._body_open = True, False
        self._steps += 1
        super().on_message_complete()

    # -- limits
    def _arm(self, delay: float, handler: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, handler)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if self._head_open and not self.transport.is_closing():
            self._refuse(HTTPStatus.REQUEST_TIMEOUT)

    def _body_idle_check(self) -> None:
        self._timer = None
        if not self._body_open or self.transport.is_closing():
            return
        idle = self.loop.time() - self._last_data
        if self.flow.read_paused:  # the app is not reading: not the client's stall
            self._last_data, idle = self.loop.time(), 0.0
        if idle >= self.limits.http_body_idle_seconds:
            self._refused = True
            self.transport.close()
        else:
            self._arm(self.limits.http_body_idle_seconds - idle, self._body_idle_check)

    def _refuse(self, status: HTTPStatus) -> None:
        """Answer ``status`` in plain text (unless a response is under way) and close."""
        self._refused = True
        self._disarm()
        if self.cycle is None or self.cycle.response_complete:
            text = f"{status.phrase}.".encode("ascii")
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status.value, status.phrase.encode("ascii"), len(text), text)
            )
        self.transport.close()


def bounded_protocol(limits: HttpLimits) -> type[BoundedHttpToolsProtocol]:
    """A protocol class bound to ``limits`` (uvicorn constructs protocols itself)."""
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), {"limits": limits})


def server_config(app: ASGIApp, settings: Settings, **kwargs: Any) -> uvicorn.Config:
    """uvicorn's config for ``app`` with the limits of ``settings``; ``kwargs`` as uvicorn's.

    uvicorn's own proxy-header rewriting is off: it believes ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` from any peer on 127.0.0.1 or ::1 (``FORWARDED_ALLOW_IPS``), which
    would let a local client pick the address it is throttled as. The app reads them
    itself, from ``trusted_proxies`` only (:mod:`pipeline.api.client_origin`).
    """
    return uvicorn.Config(
        app,
        proxy_headers=False,
        http=bounded_protocol(HttpLimits.of(settings)),
        timeout_keep_alive=settings.http_keep_alive_seconds,
        h11_max_incomplete_event_size=settings.http_max_header_bytes,
        **kwargs,
    )
