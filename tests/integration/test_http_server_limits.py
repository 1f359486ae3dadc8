"""The HTTP server's limits on a real socket against a real uvicorn on loopback
(issue 45, defect 2): head size, request line, header count, and the time a client
may take to send a head or go silent inside a body."""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.settings import Settings
from tests.support.api import (
    WRITTEN_TABLES,
    count_rows,
    loopback_server,
    settings_for,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: intake.test\r\n"


async def _exchange(url: str, *parts: bytes, pause: float = 0.0) -> tuple[bytes, float]:
    """Send ``parts`` (``pause`` seconds apart) and read until the server closes;
    the bytes read and the seconds from connecting to the close. A server that
    resets the connection while the client still sends has answered with the reset."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(host, int(port))
    raw = b""
    try:
        for i, part in enumerate(parts):
            if i and pause:
                await asyncio.sleep(pause)  # the client's own pace, not a wait on the server
            writer.write(part)
            await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout=20)
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        writer.close()
    return raw, time.monotonic() - started


def _status(raw: bytes) -> int | None:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None


async def test_a_head_over_the_size_limit_is_refused_not_served(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = settings_for(dsn)
    app = create_app(settings, pool=pool)
    async with loopback_server(app, limits=settings) as url:
        fine, _ = await _exchange(url, HEALTH + b"X-Pad: " + b"a" * 8000 + b"\r\n\r\n")
        big, _ = await _exchange(url, HEALTH + b"X-Pad: " + b"a" * (64 << 10) + b"\r\n\r\n")
        # 16 MiB in 64 KiB writes: refused long before the last one.
        huge, _ = await _exchange(url, HEALTH + b"X-Pad: ", *[b"a" * (64 << 10)] * 256)
    assert _status(fine) == 200
    assert settings.http_max_header_bytes == 16 << 10
    for raw in (big, huge):
        assert _status(raw) in (431, None), raw[:200]  # 431, or closed: never served


async def test_a_request_line_over_the_limit_is_a_414(pool: asyncpg.Pool, dsn: str) -> None:
    settings = settings_for(dsn)
    app = create_app(settings, pool=pool)
    async with loopback_server(app, limits=settings) as url:
        raw, _ = await _exchange(
            url, b"GET /healthz?" + b"q" * (9 << 10) + b" HTTP/1.1\r\nHost: intake.test\r\n\r\n"
        )
    assert _status(raw) == 414 and b"connection: close" in raw.lower()


async def test_more_headers_than_the_limit_is_a_431_problem(pool: asyncpg.Pool, dsn: str) -> None:
    settings = settings_for(dsn)
    app = create_app(settings, pool=pool)
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(settings.http_max_headers))
    async with loopback_server(app, limits=settings) as url:
        at_limit, _ = await _exchange(url, HEALTH.split(b"Host")[0] + headers + b"\r\n")
        over, _ = await _exchange(url, HEALTH + headers + b"\r\n")
    assert _status(at_limit) == 200  # 100 headers, Host among them
    assert _status(over) == 431
    problem = json.loads(over.partition(b"\r\n\r\n")[2])
    assert problem["reason"] == "headers_over_limit" and "101 headers" in problem["detail"]


@pytest.mark.parametrize("sent", [b"", HEALTH], ids=["silent", "half-head"])
async def test_a_head_not_sent_in_time_is_a_408_and_closed(
    pool: asyncpg.Pool, dsn: str, sent: bytes
) -> None:
    settings = settings_for(dsn, http_header_timeout_seconds=1.0)
    app = create_app(settings, pool=pool)
    async with loopback_server(app, limits=settings) as url:
        raw, seconds = await _exchange(url, sent)
    assert _status(raw) == 408
    assert 0.9 <= seconds < 4, seconds


async def test_a_stalled_body_is_closed_within_the_idle_timeout_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    settings = settings_for(dsn, http_body_idle_seconds=1.0)
    app = create_app(settings, pool=pool)
    body = json.dumps(submission()).encode()
    head = (
        f"POST {JOBS} HTTP/1.1\r\nHost: intake.test\r\n"
        f"Authorization: Bearer {tk.key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with loopback_server(app, limits=settings) as url:
        stalled, seconds = await _exchange(url, head + body[:10])
        # A slow body that never goes a whole idle period without a byte is served.
        slow, slow_seconds = await _exchange(
            url, head, body[:10], body[10:20], body[20:], pause=0.6
        )
    assert _status(stalled) is None and stalled == b""
    assert 0.9 <= seconds < 4, seconds
    assert _status(slow) == 202 and slow_seconds > settings.http_body_idle_seconds
    after = await count_rows(pool, *WRITTEN_TABLES)
    assert after["extraction_jobs"] - before["extraction_jobs"] == 1


def test_the_defaults_are_the_documented_ones() -> None:
    s = Settings()
    assert (s.http_max_request_line_bytes, s.http_max_header_bytes, s.http_max_headers) == (
        8 << 10,
        16 << 10,
        100,
    )
    assert (s.http_header_timeout_seconds, s.http_body_idle_seconds) == (10.0, 10.0)
    assert s.http_keep_alive_seconds == 5


async def test_requests_within_the_limits_share_a_kept_alive_connection(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """The bounds apply per request: a connection that served a body and a small head
    serves the next request, and a pipelined pair is answered in order."""
    tk = await tenant_with_key(pool)
    settings = settings_for(dsn, http_header_timeout_seconds=1.0, http_body_idle_seconds=1.0)
    app = create_app(settings, pool=pool)
    async with (
        loopback_server(app, limits=settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        answers = []
        for _ in range(3):
            answers.append(await client.post(JOBS, json=submission(), headers=tk.headers))
            await asyncio.sleep(1.2)  # idle past both timeouts between requests, kept alive
            answers.append(await client.get("/healthz"))
        pipelined, _ = await _exchange(
            url, HEALTH + b"\r\n" + HEALTH + b"Connection: close\r\n\r\n"
        )
    assert [r.status_code for r in answers] == [202, 200] * 3
    assert len({id(r.extensions["network_stream"]) for r in answers}) == 1  # one connection
    assert pipelined.count(b"HTTP/1.1 200 OK") == 2
