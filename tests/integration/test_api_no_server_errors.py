"""No input answers 500 (issue 45, defect 1): each cause the second sweep found, by
the request that reached it, answered with a 4xx problem, a login redirect or a page.

Six causes: an overflowing number in ``options``; a ``Last-Event-ID`` of non-ASCII
digits; a cursor or re-drive date that leaves the calendar once moved to UTC; a NUL
in the console's supplier filter; non-ASCII console cookies and CSRF tokens; and an
expired key sent as Bearer to a console route.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from urllib.parse import quote

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.api import create_app
from pipeline.api.console.session import LOGIN_COOKIE, SESSION_COOKIE
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
from tests.support.console import console_login, form_token

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"


# ----------------------------------------------------- (a) numbers in options
@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+999", "2.5e-400000"])
async def test_a_number_past_the_float_range_in_options_is_a_422(
    pool: asyncpg.Pool, dsn: str, number: str
) -> None:
    tk = await tenant_with_key(pool)
    body = json.dumps(submission()).replace(
        '"document"', f'"options": {{"x": {number}}}, "document"'
    )
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(
            JOBS, content=body, headers={**tk.headers, "Content-Type": "application/json"}
        )
    assert_problem(r, 422, "number_out_of_range")
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_an_ordinary_number_in_options_reaches_the_options_own_check(
    pool: asyncpg.Pool, dsn: str
) -> None:
    # 1e300 is a float, so the number reader keeps it; ocr_languages then refuses a
    # value that names no language (422 invalid_option, not number_out_of_range or 500).
    tk = await tenant_with_key(pool)
    body = json.dumps(submission(options={"ocr_languages": [1e300, 7]}))
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(
            JOBS, content=body, headers={**tk.headers, "Content-Type": "application/json"}
        )
    assert_problem(r, 422, "invalid_option")


# ------------------------------------------------------- (b) Last-Event-ID
@pytest.mark.parametrize("value", ["²", "¹²³", "٣", "12²", "1" * 30, "-1", "7e2"])
async def test_an_unusable_last_event_id_starts_a_fresh_snapshot_on_every_stream(
    pool: asyncpg.Pool, dsn: str, value: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "operator"))
    # As a client sends it: one byte a character where Latin-1 has it (as servers read
    # header bytes), else UTF-8.
    raw = value.encode("latin-1") if value.isascii() or value in "²¹²³12²" else value.encode()
    headers = [("Authorization", tk.headers["Authorization"]), ("Last-Event-ID", raw)]
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        r = await client.post(JOBS, json=submission(), headers=tk.headers)
        job = r.json()["job_id"]
        for path in (f"{JOBS}/{job}/events", "/v1/events", "/console/events"):
            async with client.stream("GET", path, headers=headers) as s:
                assert s.status_code == 200, (path, await s.aread())
                first = ""
                async for line in s.aiter_lines():
                    first = line
                    break
            assert first.startswith(("event:", "id:", ":", "retry:")), (path, first)


# ------------------------------------------------ (c) dates leaving the calendar
def _cursor(created: str) -> str:
    raw = json.dumps([created, str(uuid.uuid4())], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "created",
    ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:30-00:01"],
)
async def test_a_cursor_outside_the_calendar_in_utc_is_a_400(
    pool: asyncpg.Pool, dsn: str, created: str
) -> None:
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.get(JOBS, params={"cursor": _cursor(created)}, headers=tk.headers)
    assert_problem(r, 400, "invalid_cursor")


@pytest.mark.parametrize("field", ["failed_from", "failed_before"])
@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+00:01"])
async def test_a_redrive_date_outside_the_calendar_in_utc_is_a_422(
    pool: asyncpg.Pool, dsn: str, field: str, value: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "operator"))
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(
            "/v1/redrives", json={"reason": "sweep", field: value}, headers=tk.headers
        )
    assert_problem(r, 422, "invalid_request")
    assert field in r.text
    assert await count_rows(pool, *WRITTEN_TABLES) == before


# --------------------------------------------- (d) NUL in the supplier filter
@pytest.mark.parametrize("path", ["/console/queue", "/console/queue/rows"])
async def test_a_nul_in_the_console_supplier_filter_is_a_400_page(
    pool: asyncpg.Pool, dsn: str, path: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.get(path, params={"supplier": "ACME\x00"}, headers=tk.headers)
        ok = await client.get(path, params={"supplier": "ACME"}, headers=tk.headers)
    assert r.status_code == 400, r.text
    assert "NUL" in r.text
    assert ok.status_code == 200


# -------------------------------------------- (e) non-ASCII cookies and tokens
@pytest.mark.parametrize("value", ["é.é", "Ω", "abc.d\u00e9f", "x.\u2028"])
async def test_non_ascii_session_cookies_are_no_session(
    pool: asyncpg.Pool, dsn: str, value: str
) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        cookie = f"{SESSION_COOKIE}={value}".encode()
        r = await client.get("/console/queue", headers={"Cookie": cookie})
    assert r.status_code == 303 and r.headers["location"] == "/console/login"


@pytest.mark.parametrize(("cookie", "token"), [("é.é", "x"), ("a:1.b", "é"), ("é", "é")])
async def test_non_ascii_login_cookies_and_tokens_are_a_403(
    pool: asyncpg.Pool, dsn: str, cookie: str, token: str
) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        header = f"{LOGIN_COOKIE}={cookie}".encode()
        r = await client.post(
            "/console/login",
            data={"api_key": "flk_x", "login_token": token},
            headers={"Cookie": header},
        )
    assert r.status_code == 403, r.text


async def test_a_non_ascii_csrf_token_is_a_403(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        await console_login(client, tk)
        queue = await client.get("/console/queue")
        assert form_token(queue.text)
        r = await client.post("/console/logout", data={"csrf_token": "tökén"})
    assert r.status_code == 403, r.text


# ---------------------------------------- (f) an expired key as Bearer on the console
async def test_an_expired_bearer_key_on_console_routes_is_refused_like_rest(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE api_keys SET expires_at = created_at + interval '1 millisecond' WHERE id = $1",
            tk.key_id,
        )
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        page = await client.get("/console/queue", headers=tk.headers)
        rows = await client.get("/console/queue/rows", headers=tk.headers)
        dashboard = await client.get("/console/dashboard", headers=tk.headers)
        events = await client.get("/console/events", headers=tk.headers)
        post = await client.post(
            f"/console/jobs/{uuid.uuid4()}/reject", data={}, headers=tk.headers
        )
        rest = await client.get(JOBS, headers=tk.headers)
    assert_problem(rest, 401, "key_expired")
    for r in (page, dashboard):
        assert r.status_code == 303 and r.headers["location"] == "/console/login"
    for r in (rows, events, post):
        assert r.status_code == 401, r.text
        assert "expired" in r.text


# ------------------------------------------------------------ generated input
#: Every query parameter a GET route reads, plus one no route knows.
PARAMS = ("state", "cursor", "limit", "reason", "supplier", "flash", "job", "error", "unknown")
#: Every request header a route reads, the cookies included.
HEADERS = ("Last-Event-ID", "Idempotency-Key", "Accept", "Origin", "X-Request-ID")
COOKIES = (SESSION_COOKIE, LOGIN_COOKIE)

#: What the sweeps sent that reached a 500, kept as seeds the generator draws often.
_HOSTILE = ("²", "¹²³", "12²", "9" * 19, "-1", "1e400", "é.é", "a.é", "x.y", "tökén")
#: A header value as a client can send it: bytes (a server reads them as Latin-1),
#: from ASCII, Latin-1 (``²``) or any text's UTF-8; no CR, LF, NUL or edge spaces.
_header_value = st.one_of(
    st.sampled_from(_HOSTILE).map(lambda v: v.encode("latin-1")),
    st.sampled_from(_HOSTILE).map(str.encode),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40).map(str.encode),
    st.text(st.characters(min_codepoint=0xA1, max_codepoint=0xFF), min_size=1, max_size=8).map(
        lambda v: v.encode("latin-1")
    ),
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs")), max_size=20).map(
        str.encode
    ),
)
_query_value = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["\x00", "ACME\x00", "²", "1e400", "-1", "0", "101", "READY", "x" * 500]),
    st.sampled_from(["9999-12-31T23:59:59-05:00", "0001-01-01T00:00+01:00", "2025-01-01"]).map(
        _cursor
    ),
)


def _get_routes() -> list[str]:
    app = create_app(settings_for("postgresql://unused@127.0.0.1/unused"))
    return sorted(
        r.path
        for r in app.routes
        if "GET" in (getattr(r, "methods", None) or ())
        and not r.path.startswith(("/docs", "/redoc"))
    )


@pytest.fixture(scope="module")
async def caller_key(module_dsn: str) -> str:
    """A key with every scope, so each route runs past its scope check."""
    _, key = await tenant_key_at(module_dsn, "generated-input", ("jobs", "review", "operator"))
    return key


def test_generated_query_parameters_headers_and_cookies_never_cause_a_server_error(
    module_dsn: str, caller_key: str
) -> None:
    key = caller_key
    routes = _get_routes()
    with (
        threaded_server(lambda: create_app(settings_for(module_dsn))) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        job = client.post(JOBS, json=submission(), headers={"Authorization": f"Bearer {key}"})
        assert job.status_code == 202, job.text
        job_id = job.json()["job_id"]
        path_value = st.one_of(st.just(job_id), st.text(min_size=1, max_size=40))

        @settings(
            max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(
            route=st.sampled_from(routes),
            path_values=st.lists(path_value, min_size=2, max_size=2),
            params=st.dictionaries(st.sampled_from(PARAMS), _query_value, max_size=4),
            headers=st.dictionaries(st.sampled_from(HEADERS), _header_value, max_size=3),
            cookies=st.dictionaries(st.sampled_from(COOKIES), _header_value, max_size=2),
            auth=st.sampled_from(["key", "key", "none", "none", "junk"]),
        )
        def get(
            route: str,
            path_values: list[str],
            params: dict[str, str],
            headers: dict[str, bytes],
            cookies: dict[str, bytes],
            auth: str,
        ) -> None:
            values = iter(path_values)
            path = re.sub(r"\{[^}]+\}", lambda _: quote(next(values), safe=""), route)
            sent: list[tuple[str, bytes]] = list(headers.items())
            if auth != "none":
                sent.append(
                    ("Authorization", f"Bearer {key if auth == 'key' else 'flk_x'}".encode())
                )
            if cookies:
                sent.append(
                    ("Cookie", b"; ".join(n.encode() + b"=" + v for n, v in cookies.items()))
                )
            with client.stream("GET", path, params=params, headers=sent) as r:
                assert r.status_code < 500, (path, params, sent, r.read())

        get()
