"""The intake bench's lean HTTP client, against real sockets on loopback (and its rate option).

A tiny asyncio server plays each server behaviour the client must read: a
keep-alive answer, an answer that closes, a kept-alive connection the server
drops between requests, a chunked answer. One test runs the bench's bare
Starlette endpoint under uvicorn, so the client is also checked against the
server it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import pytest
import uvicorn

from benchmarks.infra import free_port
from benchmarks.load.intake_bench import bare_app
from benchmarks.load.raw_http import RawHTTPError, RawPool

Answer = Callable[[int, bytes], bytes]


def _ok(n: int, request: bytes) -> bytes:
    body = json.dumps({"n": n, "bytes": len(request)}).encode()
    return b"HTTP/1.1 202 Accepted\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@contextlib.asynccontextmanager
async def _server(
    answer: Answer,
    *,
    per_connection: int | None = None,
    on_hangup: Callable[[int], None] | None = None,
) -> AsyncIterator[int]:
    """Answers each request with ``answer(n, request)``; closes a connection after
    ``per_connection`` answers (without saying so) when that is set, and calls
    ``on_hangup(answers on it)`` when the client closes one."""
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        answered = 0
        try:
            for _ in range(per_connection or 10**9):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    if on_hangup is not None:
                        on_hangup(answered)
                    raise
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                body = await reader.readexactly(length)
                served += 1
                answered += 1
                writer.write(answer(served, head + body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()


async def test_keep_alive_reuses_one_connection_for_sequential_requests() -> None:
    async with _server(_ok) as port:
        pool = RawPool("127.0.0.1", port, size=4)
        answers = [await pool.post_json("/x", {"i": i}) for i in range(20)]
        await pool.close()
    assert [a.status for a in answers] == [202] * 20
    assert [a.json()["n"] for a in answers] == list(range(1, 21))
    assert pool.opened == 1


async def test_the_pool_never_holds_more_connections_than_its_size() -> None:
    async with _server(_ok) as port:
        pool = RawPool("127.0.0.1", port, size=3)
        answers = await asyncio.gather(*(pool.post_json("/x", {"i": i}) for i in range(30)))
        await pool.close()
    assert sorted(a.json()["n"] for a in answers) == list(range(1, 31))
    assert 1 <= pool.opened <= 3


async def test_warm_opens_connections_before_the_first_request() -> None:
    async with _server(_ok) as port:
        pool = RawPool("127.0.0.1", port, size=8)
        await pool.warm(5)
        assert pool.opened == 5
        await asyncio.gather(*(pool.post_json("/x", {}) for _ in range(5)))
        await pool.close()
    assert pool.opened == 5


async def test_a_connection_dropped_while_idle_is_replaced_and_the_request_resent() -> None:
    async with _server(_ok, per_connection=1) as port:
        pool = RawPool("127.0.0.1", port, size=1)
        first = await pool.post_json("/x", {"i": 1})
        await asyncio.sleep(0.05)  # the server has closed the connection by now
        second = await pool.post_json("/x", {"i": 2})
        await pool.close()
    assert (first.status, second.status) == (202, 202)
    assert pool.resent == 1
    assert pool.opened == 2


async def test_connection_close_is_honoured() -> None:
    def closing(n: int, request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

    async with _server(closing, per_connection=1) as port:
        pool = RawPool("127.0.0.1", port, size=2)
        bodies = [(await pool.post_json("/x", {})).body for _ in range(3)]
        await pool.close()
    assert bodies == [b"ok"] * 3
    assert pool.opened == 3
    assert pool.resent == 0


async def test_a_chunked_answer_is_refused_not_guessed() -> None:
    def chunked(n: int, request: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"

    hangups: list[int] = []
    async with _server(chunked, on_hangup=hangups.append) as port:
        pool = RawPool("127.0.0.1", port)
        with pytest.raises(RawHTTPError, match="chunked"):
            await pool.post_json("/x", {})
        # The connection with the unread answer is closed at once, not kept or leaked.
        for _ in range(100):
            if hangups:
                break
            await asyncio.sleep(0.01)
        assert hangups == [1]
        await pool.close()


async def test_a_server_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads until the client hangs up, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    pool = RawPool("127.0.0.1", server.sockets[0].getsockname()[1], timeout=0.2)
    try:
        with pytest.raises(TimeoutError):
            await pool.post_json("/x", {})
        assert pool._idle == []
    finally:
        server.close()
        await server.wait_closed()


async def test_a_server_that_is_not_there_fails_at_once() -> None:
    pool = RawPool("127.0.0.1", free_port())
    with pytest.raises(ConnectionError):
        await pool.post_json("/x", {})


def test_only_plain_http_urls_are_accepted() -> None:
    assert (RawPool.for_url("http://127.0.0.1:8000").port, RawPool.for_url("http://h:1").host) == (
        8000,
        "h",
    )
    for bad in ("https://h:1", "http://h", "http://h:x", "ftp://h:1"):
        with pytest.raises(ValueError):
            RawPool.for_url(bad)


async def test_the_bare_endpoint_under_uvicorn_answers_the_raw_client() -> None:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(bare_app(), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        pool = RawPool.for_url(f"http://127.0.0.1:{port}", size=4)
        text = "INVOICE 1 total 10.00 EUR"
        answers = await asyncio.gather(
            *(pool.post_json("/v1/extraction-jobs", {"document": {"text": text}}) for _ in range(8))
        )
        await pool.close()
    finally:
        server.should_exit = True
        await serving
    assert {a.status for a in answers} == {202}
    assert {a.json()["chars"] for a in answers} == {len(text)}
    assert len({a.headers["location"] for a in answers}) == 8
    assert pool.opened <= 4


def test_open_rates_parse_and_refuse_what_is_not_a_rate() -> None:
    from argparse import ArgumentTypeError

    from benchmarks.load.intake_bench import open_rates

    assert open_rates("50,100, 200") == [50.0, 100.0, 200.0]
    assert open_rates("12.5") == [12.5]
    for bad in ("", "0", "50,-1", "fast", "50,,x"):
        with pytest.raises(ArgumentTypeError):
            open_rates(bad)
