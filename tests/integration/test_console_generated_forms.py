"""No console form answers 500, and a refused one writes nothing (issue 45, defect 1).

``test_api_generated_bodies.py`` covers the REST POST routes; here every console POST
route (sign-in, logout, correct, reject, re-drive) gets generated form bodies, sent
with no credentials, a live session cookie with or without its CSRF token (or a
forged one), a hostile cookie, or a Bearer key. Field values are what a hostile
client sends: NUL, lone surrogates (as their UTF-8-ish bytes), bytes that are not
UTF-8, huge fields, repeated fields, names no form declares; bodies are labelled now
and then with a content type that is not a form's. The server is a real uvicorn on
loopback; every answer must be below 500, and every 4xx must leave each table's row
count as it was. (Checked to fail: with the console's token comparison made to take
non-ASCII text again, it finds the 500 of a forged non-ASCII CSRF token.)
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from urllib.parse import quote_from_bytes

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.api import create_app
from pipeline.api.console.session import LOGIN_COOKIE, SESSION_COOKIE
from pipeline.database import connect, create_pool
from pipeline.tenants import create_api_key, create_tenant
from tests.support.api import (
    WRITTEN_TABLES,
    TenantKey,
    settings_for,
    submission,
    threaded_server,
)
from tests.support.console import form_token, invoice_awaiting_review

pytestmark = pytest.mark.integration

KEK = base64.b64encode(bytes(range(32))).decode()
#: Every table a console POST writes: a refused request leaves each count as it was.
TABLES = (
    *WRITTEN_TABLES,
    "console_sessions",
    "review_corrections",
    "review_decisions",
    "job_redrives",
    "extraction_results",
    "job_state_transitions",
)
ROUTES = (
    "/console/login",
    "/console/logout",
    "/console/jobs/{job}/correct",
    "/console/jobs/{job}/reject",
    "/console/jobs/{job}/redrive",
)
#: The fields the console's forms declare, and one no form does.
FIELDS = (
    "api_key",
    "login_token",
    "csrf_token",
    "state_version",
    "note",
    "action",
    "override",
    "reason",
    "value.gross",
    "value.invoice_number",
    "value.lines.0.amount",
    "value.",
    "extra",
)
#: Raw bytes a hostile client puts in a field (not always UTF-8).
HOSTILE_VALUES = (
    b"",
    b"\x00",
    b"ACME\x00",
    b"\xed\xa0\x80",  # a lone surrogate as CESU bytes: not UTF-8
    b"x\xed\xbf\xbf",
    b"\xff\xfe",
    b"\xc3",
    "\u202egnp.exe".encode(),
    b"x" * 70_000,
    b"1e400",
    b"-" + b"9" * 5000,
    b"9" * 5000,
    b"NaN",
    b"approve",
    b"reject",
    b"gross_total_mismatch|gross",
    b"|",
    "²".encode(),
    b"0",
    b"-1",
    b"1",
)
CONTENT_TYPES = (
    *("application/x-www-form-urlencoded",) * 6,
    "application/x-www-form-urlencoded; charset=latin-1",
    "application/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "",
)
#: Cookie values a hostile client sends in place of the session's (latin-1 is all a
#: header carries; the server must decode them defensively).
HOSTILE_COOKIES = ("", "x", "²", "\x7f", "a" * 5000, "é", '"quoted"', "=;=")


def _urlencoded(pairs: list[tuple[str, bytes]]) -> bytes:
    return "&".join(f"{k}={quote_from_bytes(v)}" for k, v in pairs).encode()


def _multipart(pairs: list[tuple[str, bytes]]) -> bytes:
    parts = [
        b'--x\r\nContent-Disposition: form-data; name="' + k.encode() + b'"\r\n\r\n' + v + b"\r\n"
        for k, v in pairs
    ]
    return b"".join(parts) + b"--x--\r\n"


class Console:
    """A sync client on a real server and the credentials a form can carry; a live
    session is signed in again whenever a logout (or anything else) ended it."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key
        self.session, self.csrf = "", ""
        self.login_cookie, self.login_token = "", ""

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=30)

    def fresh_login_form(self) -> None:
        with self.client() as c:
            page = c.get("/console/login")
            assert page.status_code == 200
            self.login_cookie = page.cookies[LOGIN_COOKIE]
            self.login_token = form_token(page.text, "login_token")

    def live_session(self) -> tuple[str, str]:
        with self.client() as c:
            if self.session:
                c.cookies.set(SESSION_COOKIE, self.session)
                page = c.get("/console/queue")
                if page.status_code == 200:
                    return self.session, self.csrf
                c.cookies.clear()
            login = c.get("/console/login")
            r = c.post(
                "/console/login",
                data={"api_key": self.key, "login_token": form_token(login.text, "login_token")},
            )
            assert r.status_code == 303, r.text
            self.session = r.cookies[SESSION_COOKIE]
            self.csrf = form_token(c.get("/console/queue").text)
        return self.session, self.csrf


@pytest.fixture(scope="module")
async def caller(module_dsn: str) -> TenantKey:
    """A key with every scope, so each route runs past its scope check."""
    conn = await connect(module_dsn)
    try:
        tenant = await create_tenant(conn, "generated-forms")
        key_id, key = await create_api_key(conn, tenant.id, scopes=("jobs", "review", "operator"))
    finally:
        await conn.close()
    return TenantKey(tenant, key, key_id)


@pytest.fixture(scope="module")
def console(module_dsn: str, caller: TenantKey) -> Iterator[tuple[Console, list[str]]]:
    """A real uvicorn on loopback (the sign-in throttle wide open, so valid sign-ins
    keep reaching the key check) and the job ids a path may name: one awaiting review
    (correct and reject reach their writes) and one still queued."""
    overrides = {
        "webhook_secret_key": KEK,
        "console_session_key": "k" * 40,
        "console_login_failures_per_address": 1_000_000,
        "console_login_failures_per_address_key": 1_000_000,
        "console_login_attempts_per_key": 1_000_000,
    }
    make = lambda: create_app(settings_for(module_dsn, **overrides))  # noqa: E731

    async def jobs(base: str) -> list[str]:
        pool = await create_pool(module_dsn, min_size=1, max_size=2)
        try:
            async with httpx.AsyncClient(base_url=base, timeout=30) as c:
                waiting = await invoice_awaiting_review(pool, c, caller)
                queued = await c.post(
                    "/v1/extraction-jobs", json=submission(), headers=caller.headers
                )
                assert queued.status_code == 202, queued.text
        finally:
            await pool.close()
        return [str(waiting.job_id), queued.json()["job_id"]]

    with threaded_server(make) as base:
        ids = asyncio.run(jobs(base))
        yield Console(base, caller.key), ids


class Database:
    """Each table's row count, and a job's state version, on one connection of its own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, conn: asyncpg.Connection) -> None:
        self.loop, self.conn = loop, conn

    def counts(self) -> dict[str, int]:
        async def read() -> dict[str, int]:
            return {t: int(await self.conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}

        return self.loop.run_until_complete(read())

    def state_version(self, job_id: str) -> int:
        try:
            job = uuid.UUID(job_id)
        except ValueError:
            return 1
        query = "SELECT state_version FROM extraction_jobs WHERE id = $1"
        found = self.loop.run_until_complete(self.conn.fetchval(query, job))
        return int(found or 1)


@pytest.fixture(scope="module")
def database(module_dsn: str) -> Iterator[Database]:
    loop = asyncio.new_event_loop()
    conn: asyncpg.Connection = loop.run_until_complete(connect(module_dsn))
    yield Database(loop, conn)
    loop.run_until_complete(conn.close())
    loop.close()


@pytest.mark.parametrize("route", ROUTES)
def test_generated_and_hostile_console_forms_never_cause_a_server_error_or_a_write(
    route: str, console: tuple[Console, list[str]], database: Database
) -> None:
    con, ids = console
    job = st.one_of(
        st.sampled_from(ids),
        st.just(str(uuid.UUID(int=0))),
        st.sampled_from(["x", "²", "%00", "%ED%A0%80"]),
    )
    value = st.one_of(
        st.sampled_from(HOSTILE_VALUES),
        st.text(max_size=30).map(lambda s: s.encode("utf-8", "surrogatepass")),
    )

    @settings(
        max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        job_id=job,
        auth=st.sampled_from(["none", "session", "session", "session", "cookie", "bearer"]),
        csrf=st.sampled_from(["valid", "valid", "forged", "missing", "repeated"]),
        login=st.sampled_from(["valid", "valid", "forged", "missing"]),
        fields=st.lists(st.tuples(st.sampled_from(FIELDS), value), max_size=6),
        hostile_cookie=st.sampled_from(HOSTILE_COOKIES),
        content_type=st.sampled_from(CONTENT_TYPES),
        multipart=st.booleans(),
        well_formed=st.booleans(),
    )
    def post(
        job_id: str,
        auth: str,
        csrf: str,
        login: str,
        fields: list[tuple[str, bytes]],
        hostile_cookie: str,
        content_type: str,
        multipart: bool,
        well_formed: bool,
    ) -> None:
        path = route.replace("{job}", job_id)
        headers: dict[str, str] = {}
        cookies: list[str] = []
        pairs: list[tuple[str, bytes]] = []
        if route == "/console/login":
            con.fresh_login_form()
            pairs.append(("api_key", con.key.encode()))
            if login != "missing":
                cookies.append(f"{LOGIN_COOKIE}={con.login_cookie}")
                token = con.login_token if login == "valid" else "forged." + con.login_token
                pairs.append(("login_token", token.encode()))
        elif auth == "session":
            session, token = con.live_session()
            cookies.append(f"{SESSION_COOKIE}={session}")
            if csrf != "missing":
                pairs.append(("csrf_token", (token if csrf != "forged" else token[::-1]).encode()))
            if csrf == "repeated":
                pairs.append(("csrf_token", b"\x00"))
        elif auth == "cookie":
            cookies.append(f"{SESSION_COOKIE}={hostile_cookie}")
        elif auth == "bearer":
            headers["Authorization"] = f"Bearer {con.key}"
        if "²" in hostile_cookie:
            cookies.append(f"{LOGIN_COOKIE}={hostile_cookie}")
        if well_formed:  # what the page's form sends, so valid requests reach the writes
            version = str(database.state_version(job_id)).encode()
            pairs += [("state_version", version), ("note", b"checked"), ("reason", b"retry")]
        pairs.extend(fields)
        if multipart and content_type.startswith("multipart/form-data; boundary=x"):
            raw = _multipart(pairs)
        else:
            raw = _urlencoded(pairs)
        headers["Content-Type"] = content_type
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        before = database.counts()
        with httpx.Client(base_url=con.base, timeout=30) as c:
            encoded = {k.encode(): v.encode("latin-1") for k, v in headers.items()}
            r = c.post(path, content=raw, headers=encoded)
        assert r.status_code < 500, (path, headers, raw[:300], r.status_code, r.text[:500])
        if r.status_code >= 400:
            assert database.counts() == before, (path, raw[:300], r.status_code)

    post()
