"""Console sessions end on the server (issue 45, defect 5): logout and key revocation
refuse the old cookie at once; only the id's digest is stored; the cookie is
``Secure`` behind a trusted TLS proxy and not on a forwarding header from anyone
else; the sign-in limit keys on the client a trusted proxy names, never on a header
an untrusted peer sends, and one person's failures with one key leave the address
to other keys until the address's own budget is spent. Real HTTP, real PostgreSQL."""

from __future__ import annotations

import hashlib

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.api.console.session import LOGIN_COOKIE, SESSION_COOKIE
from pipeline.tenants import revoke_key
from tests.support.api import (
    TenantKey,
    add_key,
    iter_sse,
    loopback_server,
    read_sse,
    settings_for,
    tenant_with_key,
)
from tests.support.console import console_login, form_token

pytestmark = pytest.mark.integration


async def _session_cookie(c: httpx.AsyncClient, tk: TenantKey) -> str:
    r = await console_login(c, tk)
    value = r.cookies.get(SESSION_COOKIE)
    assert value, r.headers.get("set-cookie")
    return value


async def _with_cookie(base: str, cookie: str) -> httpx.Response:
    """The queue page asked for by a browser holding only ``cookie`` (a copy of it)."""
    async with httpx.AsyncClient(base_url=base, timeout=10) as other:
        return await other.get("/console/queue", headers={"Cookie": f"{SESSION_COOKIE}={cookie}"})


async def _rows(pool: asyncpg.Pool, tk: TenantKey) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            "SELECT id_hash, tenant_id, expires_at - created_at AS lifetime"
            " FROM console_sessions WHERE key_id = $1",
            tk.key_id,
        )


async def test_logout_ends_the_session_and_a_copy_of_its_cookie(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn, console_session_key="k" * 40), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        cookie = await _session_cookie(c, tk)
        before = await _with_cookie(base, cookie)
        csrf = form_token((await c.get("/console/queue")).text)
        logout = await c.post("/console/logout", data={"csrf_token": csrf})
        after = await _with_cookie(base, cookie)
        again = await c.post("/console/logout", data={"csrf_token": csrf})
    assert before.status_code == 200
    assert logout.status_code == 303 and logout.headers["location"] == "/console/login"
    assert f'{SESSION_COOKIE}=""' in logout.headers["set-cookie"]
    assert after.status_code == 303 and after.headers["location"] == "/console/login"
    assert again.status_code == 401  # nothing left to log out of


async def test_the_database_holds_the_session_ids_digest_never_the_id(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs",))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        r = await console_login(c, tk)
        cookie = r.cookies.get(SESSION_COOKIE)
        stored = await _rows(pool, tk)
        csrf = form_token((await c.get("/console/queue")).text)
        await c.post("/console/logout", data={"csrf_token": csrf})
        left = await _rows(pool, tk)
    assert cookie and len(cookie) == 43
    (row,) = stored
    assert row["id_hash"] == hashlib.sha256(cookie.encode()).hexdigest()
    assert row["tenant_id"] == tk.tenant.id
    assert row["lifetime"].total_seconds() == 8 * 3600  # today's lifetime is the default
    assert "max-age=28800" in r.headers["set-cookie"].lower()
    assert left == []


async def test_revoking_a_key_ends_its_sessions_for_good(pool: asyncpg.Pool, dsn: str) -> None:
    """Revocation (the operator's ``keys revoke`` path) deletes the key's sessions in its
    transaction: even a key restored by hand afterwards does not bring them back."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    other = await add_key(pool, tk, ("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            cookie = await _session_cookie(c, tk)
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            kept = await _session_cookie(c, other)
        before = await _with_cookie(base, cookie)
        async with pool.acquire() as conn:
            assert await revoke_key(conn, tk.tenant.id, tk.key_id) is True
        revoked = await _with_cookie(base, cookie)
        async with pool.acquire() as conn:
            restored = await conn.execute(
                "UPDATE api_keys SET revoked_at = NULL WHERE id = $1", tk.key_id
            )
        after_restore = await _with_cookie(base, cookie)
        other_key = await _with_cookie(base, kept)
    assert before.status_code == 200
    assert revoked.status_code == 303 and revoked.headers["location"] == "/console/login"
    assert restored == "UPDATE 1"
    assert after_restore.status_code == 303  # its sessions are gone, not merely refused
    assert await _rows(pool, tk) == []
    assert other_key.status_code == 200  # another key's session of the tenant stands


async def test_an_expired_session_is_refused(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs",))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        cookie = await _session_cookie(c, tk)
        async with pool.acquire() as conn:
            moved = await conn.execute(
                "UPDATE console_sessions SET expires_at = created_at + interval '1 millisecond'"
                " WHERE key_id = $1",
                tk.key_id,
            )
        after = await _with_cookie(base, cookie)
    assert moved == "UPDATE 1"
    assert after.status_code == 303 and after.headers["location"] == "/console/login"


async def _cookies_set(base: str, tk: TenantKey, headers: dict[str, str]) -> list[str]:
    """The Set-Cookie headers of the sign-in form and of a successful sign-in."""
    async with httpx.AsyncClient(base_url=base, timeout=10, headers=headers) as c:
        page = await c.get("/console/login")
        token = form_token(page.text, "login_token")
        # A Secure cookie is not sent back over plain http: hand the login cookie back.
        login_cookie = page.cookies.get(LOGIN_COOKIE)
        c.cookies.clear()
        r = await c.post(
            "/console/login",
            data={"api_key": tk.key, "login_token": token},
            headers={"Cookie": f"{LOGIN_COOKIE}={login_cookie}"},
        )
    assert r.status_code == 303, r.text
    return page.headers.get_list("set-cookie") + r.headers.get_list("set-cookie")


async def test_cookies_are_secure_behind_a_trusted_tls_proxy_only(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs",))
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.5"}
    trusting = settings_for(dsn, trusted_proxies="127.0.0.1")
    not_trusting = settings_for(dsn, trusted_proxies="10.0.0.0/8")
    async with loopback_server(create_app(trusting, pool=pool), limits=trusting) as base:
        behind_proxy = await _cookies_set(base, tk, https)
        plain = await _cookies_set(base, tk, {})
    async with loopback_server(create_app(not_trusting, pool=pool), limits=not_trusting) as base:
        spoofed = await _cookies_set(base, tk, https)
    names = [LOGIN_COOKIE, SESSION_COOKIE, LOGIN_COOKIE]
    assert [c.split("=", 1)[0] for c in behind_proxy] == names
    assert all("; secure" in c.lower() for c in behind_proxy), behind_proxy
    for cookies in (plain, spoofed):
        assert [c.split("=", 1)[0] for c in cookies] == names
        assert not any("secure" in c.lower() for c in cookies), cookies


async def _sign_in(base: str, key: str, forwarded_for: str | None = None) -> int:
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    async with httpx.AsyncClient(base_url=base, timeout=10, headers=headers) as c:
        page = await c.get("/console/login")
        r = await c.post(
            "/console/login",
            data={"api_key": key, "login_token": form_token(page.text, "login_token")},
        )
    return r.status_code


async def test_forwarded_for_from_an_untrusted_peer_does_not_sidestep_the_limit(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """Each failure claims another address in X-Forwarded-For; from a peer that is not
    a trusted proxy the claim is ignored and the peer's budget runs out. From a trusted
    proxy the same claims are separate clients (the setting is what makes them so)."""
    tk = await tenant_with_key(pool, scopes=("jobs",))
    limits = {"console_login_failures_per_address": 3}
    answers: dict[str, list[int]] = {}
    for name, settings in (
        ("untrusted", settings_for(dsn, **limits)),
        ("trusted", settings_for(dsn, trusted_proxies="127.0.0.1", **limits)),
    ):
        async with loopback_server(create_app(settings, pool=pool), limits=settings) as base:
            answers[name] = [
                await _sign_in(base, f"flk_{i}guess{i}", f"198.51.100.{i}") for i in range(4)
            ] + [await _sign_in(base, tk.key, "198.51.100.99")]
    assert answers["untrusted"] == [401, 401, 401, 429, 429]
    assert answers["trusted"] == [401, 401, 401, 401, 303]


async def test_one_keys_failures_leave_the_address_to_other_keys(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """Reviewers behind one address: one of them retrying a wrong key is stopped at the
    per-key budget (2 here) while another key signs in; only failures with varying keys
    spend the address's budget (4 here), and then every key waits."""
    tk = await tenant_with_key(pool, scopes=("jobs",))
    other = await add_key(pool, tk, ("jobs",))
    settings = settings_for(
        dsn, console_login_failures_per_address=4, console_login_failures_per_address_key=2
    )
    app = create_app(settings, pool=pool)
    mistyped = [tk.key[:-1] + c for c in "!?#"]  # the same key, typed wrong three times
    async with loopback_server(app, limits=settings) as base:
        retries = [await _sign_in(base, key) for key in mistyped]
        right_after = await _sign_in(base, other.key)
        guesses = [await _sign_in(base, f"flk_{i}{i}{i}{i}wrong") for i in range(3)]
        locked = await _sign_in(base, other.key)
    assert retries == [401, 401, 429]
    assert right_after == 303
    assert guesses == [401, 401, 429]  # 2 + 2 failures: the address's 4 are spent
    assert locked == 429


async def test_logout_ends_the_sessions_open_event_stream(pool: asyncpg.Pool, dsn: str) -> None:
    """The console's live updates re-check the session, not only its key: a stream
    opened with the cookie ends (``revoked``) soon after that session's logout."""
    tk = await tenant_with_key(pool, scopes=("jobs",))
    settings = settings_for(dsn, sse_key_recheck_seconds=0.2, sse_poll_seconds=0.5)
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        await console_login(c, tk)
        csrf = form_token((await c.get("/console/queue")).text)
        async with c.stream("GET", "/console/events") as r:
            assert r.status_code == 200
            events = iter_sse(r)
            logout = await c.post("/console/logout", data={"csrf_token": csrf})
            rest = await read_sse(events, until="revoked", timeout=5)
            assert await anext(events, None) is None  # the server closed the stream
    assert logout.status_code == 303
    assert rest[-1].event == "revoked"
