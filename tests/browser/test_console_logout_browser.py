"""Logout in a real headless Chromium (issue 45, defect 5 acceptance): after a reviewer
signs out, the session cookie the browser held is refused, put back by hand or sent
from another client; the session's row is gone."""

from __future__ import annotations

import asyncpg
import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from pipeline.api.console.session import SESSION_COOKIE
from tests.browser.test_console_browser import sign_in
from tests.support.api import settings_for, tenant_with_key, threaded_server

pytestmark = [pytest.mark.integration, pytest.mark.browser]


async def test_after_logout_the_old_session_cookie_is_refused(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    settings = settings_for(dsn)
    with threaded_server(lambda: create_app(settings)) as base:
        sign_in(browser, base, tk)
        held = browser.get_cookie(SESSION_COOKIE)
        assert held is not None and held["httpOnly"] and held["path"] == "/console"
        old = held["value"]

        browser.find_element(By.CSS_SELECTOR, 'form[action="/console/logout"] button').click()
        WebDriverWait(browser, 10).until(ec.url_contains("/console/login"))
        assert browser.get_cookie(SESSION_COOKIE) is None

        # The old cookie, put back into the browser, opens nothing.
        browser.add_cookie({"name": SESSION_COOKIE, "value": old, "path": "/console"})
        browser.get(f"{base}/console/queue")
        WebDriverWait(browser, 10).until(ec.url_contains("/console/login"))
        assert browser.find_element(By.ID, "api_key").is_displayed()
        browser.get("about:blank")
        # Nor does a copy sent from another client.
        async with httpx.AsyncClient(base_url=base, timeout=10) as other:
            copy = await other.get("/console/queue", headers={"Cookie": f"{SESSION_COOKIE}={old}"})
    assert copy.status_code == 303 and copy.headers["location"] == "/console/login"
    async with pool.acquire() as conn:
        left = await conn.fetchval(
            "SELECT count(*) FROM console_sessions WHERE key_id = $1", tk.key_id
        )
    assert left == 0
