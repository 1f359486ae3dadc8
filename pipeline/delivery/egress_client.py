"""The HTTP client of deliveries: every request through the egress guard, pinned to
the address the guard checked.

:class:`PinnedTransport` connects to the checked address (never a second DNS
answer) while TLS still verifies the URL's host name; :class:`EgressClient`
checks every request and every redirect hop with
:class:`~pipeline.delivery.egress.EgressGuard`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from pipeline.delivery.egress import PIN_EXTENSION, EgressGuard, egress_blocked
from pipeline.errors import EgressBlocked


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address the guard pinned, keeping Host and TLS name.

    One inner connection pool per (scheme, host name, address, port): a TLS
    connection verified for one name is never reused for another.
    """

    def __init__(self, *, verify: ssl.SSLContext | bool = True, max_pools: int = 256) -> None:
        self._verify = verify
        self._max_pools = max_pools
        self._pools: dict[tuple[str, str, str, int], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        address = request.extensions.get(PIN_EXTENSION)
        if not isinstance(address, str):
            raise egress_blocked("unpinned", "request was not checked by the egress guard")
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        key = (request.url.scheme, host, address, port)
        inner = self._pools.get(key)
        if inner is None:
            if len(self._pools) >= self._max_pools:
                await self._pools.pop(next(iter(self._pools))).aclose()
            inner = httpx.AsyncHTTPTransport(verify=self._verify, retries=0, trust_env=False)
            self._pools[key] = inner
        request.url = request.url.copy_with(host=address)
        if request.url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        return await inner.handle_async_request(request)

    async def aclose(self) -> None:
        pools, self._pools = self._pools, {}
        for inner in pools.values():
            await inner.aclose()


@dataclass(frozen=True)
class HttpOutcome:
    """What one POST produced; ``status`` is None when no response arrived."""

    status: int | None
    latency_ms: float
    error_class: str | None = None
    error: str | None = None
    retry_after: str | None = None
    location: str | None = None
    address: str | None = None
    body_excerpt: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)


class EgressClient:
    """POSTs to guarded, pinned destinations; never follows redirects, never raises.

    Args:
        guard: the SSRF guard consulted on every call (DNS is resolved per call).
        timeout_seconds: a bound on the whole attempt, name resolution to last body byte.
        max_response_bytes: how much of a response body is read (the rest is dropped).
        verify: TLS verification (a context for private CAs in tests).
    """

    def __init__(
        self,
        guard: EgressGuard,
        *,
        timeout_seconds: float = 10.0,
        max_response_bytes: int = 65536,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.guard = guard
        self.timeout_seconds = timeout_seconds
        self.max_response_bytes = max_response_bytes
        self._client = httpx.AsyncClient(
            transport=PinnedTransport(verify=verify),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout_seconds),
        )

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpOutcome:
        """One guarded POST of ``body``; every failure becomes an :class:`HttpOutcome`."""
        started = time.monotonic()

        def ms() -> float:
            return round((time.monotonic() - started) * 1000.0, 3)

        # One deadline for the whole attempt: resolving the name counts against it.
        deadline = asyncio.get_running_loop().time() + self.timeout_seconds
        try:
            async with asyncio.timeout_at(deadline):
                pinned = await self.guard.resolve(url)
        except TimeoutError:
            return HttpOutcome(None, ms(), "timeout", "no address resolved in time")
        except EgressBlocked as exc:
            return HttpOutcome(None, ms(), "egress_blocked", f"{exc.reason}: {exc}")
        try:
            request = self._client.build_request(
                "POST",
                url,
                content=body,
                headers={
                    "content-type": "application/json",
                    "user-agent": "fenceline-webhooks/1",
                    **headers,
                },
                extensions={PIN_EXTENSION: pinned.address},
            )
        except (httpx.InvalidURL, ValueError, TypeError, UnicodeError) as exc:
            # A header value that is not latin-1, or a URL httpx reads differently
            # now: nothing was sent, and the caller still gets an outcome.
            detail = f"{type(exc).__name__}: {exc}"[:500]
            return HttpOutcome(None, ms(), "invalid_request", detail, address=pinned.address)
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
                try:
                    excerpt = bytearray()
                    async for chunk in response.aiter_raw():
                        excerpt += chunk
                        if len(excerpt) >= self.max_response_bytes:
                            break
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            return HttpOutcome(
                None, ms(), "timeout", "no complete response in time", address=pinned.address
            )
        except EgressBlocked as exc:
            return HttpOutcome(None, ms(), "egress_blocked", f"{exc.reason}: {exc}")
        except httpx.HTTPError as exc:
            detail = f"{type(exc).__name__}: {exc}"[:500]
            return HttpOutcome(None, ms(), "transport", detail, address=pinned.address)
        return HttpOutcome(
            status=response.status_code,
            latency_ms=ms(),
            retry_after=response.headers.get("retry-after"),
            location=response.headers.get("location"),
            address=pinned.address,
            body_excerpt=bytes(excerpt[:1024]),
        )

    async def aclose(self) -> None:
        await self._client.aclose()
