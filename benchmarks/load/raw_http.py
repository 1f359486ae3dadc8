"""A lean HTTP/1.1 keep-alive client for load generation on a machine the target shares.

The intake bench runs its load generator on the same two cores as the server it
measures. ``httpx`` spends about 2.3 ms of CPU per POST here, more than the
Fenceline intake itself spends answering it (about 2 ms), so at the rates the
bench drives, the client takes a large share of the cores from the server and
adds its own scheduling delay to every latency it records. This client does
only what a load generator needs:

* persistent connections in a pool (opened ahead with :meth:`RawPool.warm`, so
  that connection set-up is not counted as acceptance latency, as it would not
  be for a client that keeps its connections);
* requests written as pre-built bytes; responses read as a status line, headers
  and a ``Content-Length`` body (a chunked or unsized answer is refused with a
  clear error, not guessed);
* an exchange that takes longer than ``timeout`` raises :class:`TimeoutError` and
  closes its connection;
* a connection that the server closed while idle is replaced and the request
  sent once more on the new one. That is safe here only because every bench
  request carries its own ``Idempotency-Key``: the intake answers a repeat with
  the job it already made.

It is a measuring instrument, not a product client: no TLS, no redirects, no
proxies, no HTTP/2.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


class RawHTTPError(RuntimeError):
    """The server answered something this client does not read (or nothing)."""


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


@dataclass
class RawPool:
    """Keep-alive connections to one ``host:port``, at most ``size`` at once."""

    host: str
    port: int
    size: int = 64
    #: Seconds one exchange (write, then read the whole answer) may take.
    timeout: float = 30.0
    opened: int = 0
    resent: int = 0
    _idle: list[_Conn] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("a pool needs at least one connection")

    @classmethod
    def for_url(cls, url: str, size: int = 64) -> RawPool:
        """``http://host:port`` (no path, no TLS) to a pool."""
        if not url.startswith("http://"):
            raise ValueError(f"only http:// URLs are supported, not {url!r}")
        host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        if not host or not port.isdigit():
            raise ValueError(f"expected http://host:port, not {url!r}")
        return cls(host, int(port), size)

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        return self._slots

    async def _open(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self.opened += 1
        return _Conn(reader, writer)

    async def warm(self, n: int) -> None:
        """Open ``n`` (at most ``size``) connections now, so requests find them ready."""
        fresh = await asyncio.gather(*(self._open() for _ in range(min(n, self.size))))
        self._idle.extend(fresh)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.writer.close()
        for conn in idle:
            try:
                await conn.writer.wait_closed()
            except OSError:
                pass

    def request_bytes(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body

    async def post_json(
        self, path: str, payload: Any, headers: dict[str, str] | None = None
    ) -> RawResponse:
        body = json.dumps(payload, separators=(",", ":")).encode()
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        return await self.send(self.request_bytes("POST", path, body, all_headers))

    async def send(self, raw: bytes) -> RawResponse:
        """Send one request (as built by :meth:`request_bytes`) and read its answer."""
        async with self._semaphore():
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._open()
            try:
                response = await self._exchange(conn, raw)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                conn.writer.close()
                if not reused:
                    raise RawHTTPError(f"connection failed: {exc!r}") from exc
                # The server closed a kept-alive (or warmed) connection while it was idle.
                self.resent += 1
                conn = await self._open()
                response = await self._closing_on_error(conn, raw)
            except BaseException:  # an answer this client does not read, a cancellation
                conn.writer.close()
                raise
            if response.headers.get("connection", "").lower() == "close":
                conn.writer.close()
            else:
                self._idle.append(conn)
            return response

    async def _closing_on_error(self, conn: _Conn, raw: bytes) -> RawResponse:
        try:
            return await self._exchange(conn, raw)
        except BaseException:
            conn.writer.close()
            raise

    async def _exchange(self, conn: _Conn, raw: bytes) -> RawResponse:
        async with asyncio.timeout(self.timeout):
            conn.writer.write(raw)
            await conn.writer.drain()
            head = await conn.reader.readuntil(b"\r\n\r\n")
            return await _read_response(conn.reader, head)


async def _read_response(reader: asyncio.StreamReader, head: bytes) -> RawResponse:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise RawHTTPError(f"not an HTTP/1.x status line: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    status = int(parts[1])
    if status in (204, 304) or status < 200:
        return RawResponse(status, headers, b"")
    if "content-length" not in headers:
        if headers.get("transfer-encoding"):
            raise RawHTTPError(f"transfer-encoding {headers['transfer-encoding']!r} not read")
        raise RawHTTPError("response without Content-Length")
    body = await reader.readexactly(int(headers["content-length"]))
    return RawResponse(status, headers, body)
