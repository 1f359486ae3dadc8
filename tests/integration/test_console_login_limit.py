"""The console's sign-in rate limit over real HTTP (issue 18): failed sign-ins from one
address, and sign-ins with one key, end in a 429 page with Retry-After that says when
to try again; the limited request never reaches the key lookup."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.api.console.headers import CONTENT_SECURITY_POLICY
from tests.support.api import add_key, loopback_server, settings_for, tenant_with_key
from tests.support.console import form_token

pytestmark = pytest.mark.integration


async def _sign_in(c: httpx.AsyncClient, key: str) -> httpx.Response:
    page = await c.get("/console/login")
    return await c.post(
        "/console/login", data={"api_key": key, "login_token": form_token(page.text, "login_token")}
    )


async def test_failed_sign_ins_from_one_address_end_in_a_429_page(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    settings = settings_for(dsn, console_login_failures_per_address=3)
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        wrong = [await _sign_in(c, f"flk_wrong{i}") for i in range(3)]
        limited = await _sign_in(c, tk.key)  # even the right key waits now
        queue = await c.get("/console/queue")
    assert [r.status_code for r in wrong] == [401, 401, 401]
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 300
    assert "Too many sign-in attempts" in limited.text
    assert f"Try again in {limited.headers['retry-after']} seconds" in limited.text
    assert limited.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "set-cookie" not in limited.headers
    assert queue.status_code == 303  # no session was made


async def test_sign_ins_with_one_key_are_limited_but_other_keys_are_not(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    other = await add_key(pool, tk, ("jobs", "review"))
    app = create_app(settings_for(dsn, console_login_attempts_per_key=2), pool=pool)
    async with loopback_server(app) as base:
        answers = []
        for key in (tk.key, tk.key, tk.key, other.key):
            async with httpx.AsyncClient(base_url=base, timeout=10) as c:
                answers.append((await _sign_in(c, key)).status_code)
    assert answers == [303, 303, 429, 303]
