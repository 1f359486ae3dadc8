"""Hostile input at the API (issue 16): each refusal is a problem document and writes nothing.

Covers what an independent bad-input sweep found: malformed webhook URLs (a
Hypothesis property through a real uvicorn), repeated single-valued headers,
invisible and bidi characters in file names and option keys, the 413 a client
still uploading must receive, expiring API keys, and the requests uvicorn
refuses before the app runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from pipeline.api import create_app
from pipeline.clock import ManualClock
from pipeline.database import connect
from pipeline.settings import Settings
from pipeline.tenants import create_api_key
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    assert_problem,
    count_rows,
    loopback_server,
    settings_for,
    submission,
    tenant_key_at,
    tenant_with_key,
    threaded_server,
)
from tests.support.urls import hostile_urls

pytestmark = pytest.mark.integration

KEK = base64.b64encode(bytes(range(32))).decode()
ENDPOINTS = "/v1/webhook-endpoints"
JOBS = "/v1/extraction-jobs"
ALL_TABLES = (
    *WRITTEN_TABLES,
    "webhook_endpoints",
    "webhook_endpoint_keys",
    "endpoint_events",
    "api_keys",
)


def production_settings(dsn: str, **kw: Any) -> Settings:
    """The egress policy as deployed: no loopback switch."""
    return settings_for(dsn, webhook_secret_key=KEK, **kw)


# ------------------------------------------------------------ 1. malformed URLs
@pytest.mark.parametrize(
    "url",
    [
        "https://[::1/",
        "https://[127.0.0.1]/",
        "https://]/hook",
        "https://[]/",
        "https://erp[1].example/",
        "https://erp.example.com:0/",
        "https://erp.example.com:65536/",
    ],
)
async def test_malformed_webhook_urls_are_422_egress_blocked(
    pool: asyncpg.Pool, dsn: str, url: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "operator"))
    before = await count_rows(pool, *ALL_TABLES)
    async with asgi_client(create_app(production_settings(dsn), pool=pool)) as client:
        r = await client.post(ENDPOINTS, json={"url": url}, headers=tk.headers)
    assert_problem(r, 422, "egress_blocked")
    assert await count_rows(pool, *ALL_TABLES) == before


@pytest.fixture(scope="module")
async def operator_key(module_dsn: str) -> tuple[str, str]:
    tenant_id, key = await tenant_key_at(module_dsn, "url-property", ("jobs", "operator"))
    return str(tenant_id), key


@pytest.fixture(scope="module")
def server_url(module_dsn: str) -> Iterator[str]:
    with threaded_server(lambda: create_app(production_settings(module_dsn))) as url:
        yield url


def _endpoint_rows(dsn: str, tenant_id: str) -> int:
    async def go() -> int:
        conn = await connect(dsn)
        try:
            sql = "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1::uuid"
            return int(await conn.fetchval(sql, tenant_id))
        finally:
            await conn.close()

    return asyncio.run(go())


def test_generated_urls_never_cause_a_server_error(
    server_url: str, operator_key: tuple[str, str], module_dsn: str
) -> None:
    tenant_id, key = operator_key
    headers = {"Authorization": f"Bearer {key}"}
    registered = 0
    with httpx.Client(base_url=server_url, headers=headers, timeout=10) as client:

        @settings(
            max_examples=400,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(url=hostile_urls)
        def post(url: str) -> None:
            nonlocal registered
            r = client.post(ENDPOINTS, json={"url": url})
            assert r.status_code in (201, 422), (url, r.status_code, r.text)
            assert r.headers["content-type"] in ("application/json", "application/problem+json")
            if r.status_code == 201:
                registered += 1  # a global literal (https://8.8.8.8/) is rightly admitted
            else:
                assert r.json()["reason"] in ("egress_blocked", "invalid_request"), r.text

        post()
    # Every refusal wrote nothing: the tenant has exactly the endpoints that got a 201.
    assert _endpoint_rows(module_dsn, tenant_id) == registered


# -------------------------------------------------------- 2. duplicate headers
@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("Authorization", [("Authorization", "Bearer flk_someone_else")]),
        ("Idempotency-Key", [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]),
        ("Content-Type", [("Content-Type", "application/json"), ("Content-Type", "text/plain")]),
    ],
)
async def test_repeated_single_valued_headers_are_400_naming_the_header(
    pool: asyncpg.Pool, dsn: str, name: str, extra: list[tuple[str, str]]
) -> None:
    tk = await tenant_with_key(pool)
    body = json.dumps(submission()).encode()
    headers = [("Authorization", tk.headers["Authorization"]), *extra]
    if name != "Content-Type":
        headers.append(("Content-Type", "application/json"))
    before = await count_rows(pool, *ALL_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(JOBS, content=body, headers=headers)
        # The same request with each header once is accepted: the refusal is the repeat.
        once = await client.post(
            JOBS, content=body, headers={**tk.headers, "Content-Type": "application/json"}
        )
    problem = assert_problem(r, 400, "duplicate_header")
    assert name in problem["detail"]
    assert once.status_code == 202, once.text
    after = await count_rows(pool, *ALL_TABLES)
    assert after["extraction_jobs"] - before["extraction_jobs"] == 1  # only `once`
    assert after["outbox_events"] - before["outbox_events"] == 1


async def test_repeated_authorization_is_refused_on_every_route(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "operator"))
    twice = [("Authorization", tk.headers["Authorization"])] * 2
    before = await count_rows(pool, *ALL_TABLES)
    async with asgi_client(create_app(production_settings(dsn), pool=pool)) as client:
        listed = await client.get(JOBS, headers=twice)
        registered = await client.post(
            ENDPOINTS, json={"url": "https://8.8.8.8/hook"}, headers=twice
        )
    for r in (listed, registered):
        assert "Authorization" in assert_problem(r, 400, "duplicate_header")["detail"]
    assert await count_rows(pool, *ALL_TABLES) == before


# ------------------------------------------------------------ 3. text safety
def named(filename: str) -> dict[str, Any]:
    body = submission()
    body["document"]["filename"] = filename
    return body


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (named("invoice\u202efdp.exe"), "document.filename"),
        (submission(options={"loc\u200bale": "de"}), "options"),
        (submission(options={"\u2066max\u2069": 1}), "options"),
        (submission(options={"tag\U000e0041": 1}), "options"),
        (named("scan\u0000.txt"), None),  # NUL keeps its own reason
    ],
)
async def test_invisible_characters_in_names_are_422_unsafe_text(
    pool: asyncpg.Pool, dsn: str, body: dict[str, Any], where: str | None
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *ALL_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(JOBS, json=body, headers=tk.headers)
    if where is None:
        assert_problem(r, 422, "nul_character")
    else:
        detail = assert_problem(r, 422, "unsafe_text")["detail"]
        assert where in detail and "U+" in detail
        assert not any(c in r.text for c in "\u202e\u200b\u2066")  # never echoed
    assert await count_rows(pool, *ALL_TABLES) == before


async def test_multipart_file_names_follow_the_same_rule(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *ALL_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        refused = await client.post(
            JOBS, files={"document": ("invoice\u202efdp.exe", b"INVOICE 1")}, headers=tk.headers
        )
        accepted = await client.post(
            JOBS, files={"document": ("Rechnung Müller 2025.txt", b"INVOICE 2")}, headers=tk.headers
        )
    assert "document.filename" in assert_problem(refused, 422, "unsafe_text")["detail"]
    assert accepted.status_code == 202, accepted.text
    after = await count_rows(pool, *ALL_TABLES)
    assert after["extraction_jobs"] - before["extraction_jobs"] == 1
    assert after["documents"] - before["documents"] == 1


# ------------------------------------------------- 4. the 413 reaches the client
LIMIT = 1000


async def _raw_post(
    url: str, head: bytes, chunks: list[bytes]
) -> tuple[int, dict[str, str], bytes]:
    """Send a request over a real socket, the whole body, then read the whole answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head)
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0)  # a client still uploading when the server decides
        raw = await asyncio.wait_for(reader.read(), timeout=15)
    finally:
        writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    header_block, _, body = rest.partition(b"\r\n\r\n")
    headers = {}
    for line in header_block.split(b"\r\n"):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def _request_head(key: str, *, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"POST {JOBS} HTTP/1.1\r\nHost: intake.test\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_client_still_uploading_receives_the_413_problem(
    pool: asyncpg.Pool, dsn: str, framing: str
) -> None:
    tk = await tenant_with_key(pool)
    body = json.dumps(submission("x" * 400_000)).encode()
    pieces = [body[i : i + 16384] for i in range(0, len(body), 16384)]
    if framing == "chunked":
        head = _request_head(tk.key, length=None)
        chunks = [f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces] + [b"0\r\n\r\n"]
    else:
        head, chunks = _request_head(tk.key, length=len(body)), pieces
    app = create_app(settings_for(dsn, max_body_bytes=LIMIT), pool=pool)
    before = await count_rows(pool, *ALL_TABLES)
    async with loopback_server(app) as url:
        for _ in range(5):  # the sweep saw 3 resets in 5 tries
            status, headers, raw = await _raw_post(url, head, chunks)
            assert status == 413
            assert headers["content-type"] == "application/problem+json"
            assert int(headers["content-length"]) == len(raw)  # the whole document arrived
            problem = json.loads(raw)
            assert (problem["status"], problem["reason"]) == (413, "body_too_large")
    assert await count_rows(pool, *ALL_TABLES) == before


async def test_httpx_uploading_a_large_body_gets_the_413_every_time(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    body = json.dumps(submission("y" * 2_000_000)).encode()
    app = create_app(settings_for(dsn, max_body_bytes=LIMIT), pool=pool)
    before = await count_rows(pool, *ALL_TABLES)
    async with loopback_server(app) as url, httpx.AsyncClient(base_url=url, timeout=15) as client:
        for _ in range(5):
            r = await client.post(
                JOBS, content=body, headers={**tk.headers, "Content-Type": "application/json"}
            )
            assert_problem(r, 413, "body_too_large")
    assert await count_rows(pool, *ALL_TABLES) == before


async def test_a_body_past_the_drain_bound_is_closed_unread(pool: asyncpg.Pool, dsn: str) -> None:
    # Past the bound the server does no more work for a refused request: the 413 is
    # sent at once with Connection: close (a client waiting on 100-continue reads it).
    tk = await tenant_with_key(pool)
    app = create_app(
        settings_for(dsn, max_body_bytes=LIMIT, max_body_drain_bytes=10_000), pool=pool
    )
    head = (
        f"POST {JOBS} HTTP/1.1\r\nHost: intake.test\r\nAuthorization: Bearer {tk.key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 50000000\r\n"
        "Expect: 100-continue\r\n\r\n"
    ).encode()
    async with loopback_server(app) as url:
        status, headers, raw = await _raw_post(url, head, [])
    assert (status, headers["connection"]) == (413, "close")
    assert json.loads(raw)["reason"] == "body_too_large"


# ----------------------------------------------------------- 5. expiring keys
async def test_a_key_is_refused_with_key_expired_once_its_expiry_passes(
    pool: asyncpg.Pool, dsn: str
) -> None:
    clock = ManualClock()
    tk = await tenant_with_key(pool)
    async with pool.acquire() as conn:
        key_id, key = await create_api_key(
            conn, tk.tenant.id, expires_in_seconds=60, now=clock.now()
        )
    headers = {"Authorization": f"Bearer {key}"}
    app = create_app(settings_for(dsn), pool=pool, clock=clock)
    async with asgi_client(app) as client:
        before_expiry = await client.post(JOBS, json=submission(), headers=headers)
        clock.advance(61)
        counts = await count_rows(pool, *ALL_TABLES)
        expired = await client.post(JOBS, json=submission(), headers=headers)
        listed = await client.get(JOBS, headers=headers)
        other = await client.post(JOBS, json=submission(), headers=tk.headers)  # no expiry
        async with pool.acquire() as conn:
            await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id)
        revoked = await client.get(JOBS, headers=headers)
    assert before_expiry.status_code == 202, before_expiry.text
    for r in (expired, listed):
        assert_problem(r, 401, "key_expired")
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert other.status_code == 202
    # A revoked key is refused as revoked (unauthorized), whatever its expiry.
    assert_problem(revoked, 401, "unauthorized")
    after = await count_rows(pool, *ALL_TABLES)
    assert after["extraction_jobs"] - counts["extraction_jobs"] == 1  # only `other`
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT created_at, expires_at FROM api_keys WHERE id = $1", key_id
        )
    assert (row["expires_at"] - row["created_at"]).total_seconds() == 60


async def test_an_expiry_must_lie_in_the_future(pool: asyncpg.Pool) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, "api_keys")
    async with pool.acquire() as conn:
        for seconds in (0, -5):
            with pytest.raises(ValueError):
                await create_api_key(conn, tk.tenant.id, expires_in_seconds=seconds)
    assert await count_rows(pool, "api_keys") == before


# ------------------------------------- 6. requests the HTTP server may refuse itself
@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_content_length_with_transfer_encoding_is_refused_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str, http: str
) -> None:
    tk = await tenant_with_key(pool)
    body = json.dumps(submission()).encode()
    raw = (
        (
            f"POST {JOBS} HTTP/1.1\r\nHost: intake.test\r\nAuthorization: Bearer {tk.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
    )
    before = await count_rows(pool, *ALL_TABLES)
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app, http=http) as url:
        status, headers, answer = await _raw_post(url, raw, [])
    assert status == 400
    if http == "h11":  # h11 hands the request to the app, which refuses it
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(answer)["reason"] == "ambiguous_framing"
        assert headers["connection"] == "close"
    else:  # httptools refuses it before the app runs (documented in docs/intake.md)
        assert headers["content-type"] == "text/plain; charset=utf-8"
    assert await count_rows(pool, *ALL_TABLES) == before


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_a_negative_content_length_is_a_400_before_the_app(
    pool: asyncpg.Pool, dsn: str, http: str
) -> None:
    tk = await tenant_with_key(pool)
    raw = (
        f"POST {JOBS} HTTP/1.1\r\nHost: intake.test\r\nAuthorization: Bearer {tk.key}\r\n"
        "Content-Type: application/json\r\nContent-Length: -5\r\n\r\n"
    ).encode()
    before = await count_rows(pool, *ALL_TABLES)
    async with loopback_server(create_app(settings_for(dsn), pool=pool), http=http) as url:
        status, headers, answer = await _raw_post(url, raw, [])
    # Both parsers refuse it themselves, in text/plain (measured; docs/intake.md).
    assert (status, headers["content-type"]) == (400, "text/plain; charset=utf-8")
    assert answer == b"Invalid HTTP request received."
    assert await count_rows(pool, *ALL_TABLES) == before
