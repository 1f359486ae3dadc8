"""The operator experience in a real headless Chromium (issue 45, defect 7 acceptance):
an approval with reasons left is refused on the page with the reasons and writes no
row; the dashboard refreshes by itself (no reload) and its counts open the jobs behind
them; the breaker column stays on screen at 1280 px; the review page fits 390 px.
Screenshots go to ``results/console/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from tests.browser.test_console_browser import sign_in
from tests.support.api import settings_for, submission, tenant_with_key, threaded_server
from tests.support.console import invoice_awaiting_review
from tests.support.delivery import registry_for

pytestmark = [pytest.mark.integration, pytest.mark.browser]

#: An endpoint URL as long as real ones get (a path with a tenant and a token).
LONG_URL = "http://127.0.0.1:9/erp/" + "/".join(["inbound-invoices-for-the-finance-team"] * 4)


def viewport(browser: webdriver.Chrome, width: int, height: int, *, mobile: bool) -> None:
    """Lay pages out ``width`` CSS pixels wide, as a screen of that size would."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )


def boxes(browser: webdriver.Chrome, selector: str) -> list[dict[str, Any]]:
    """Each visible element's box (left, right, id or name) and the viewport's width."""
    result: list[dict[str, Any]] = browser.execute_script(
        """
        return Array.from(document.querySelectorAll(arguments[0]))
          .filter(e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden')
          .map(e => { const r = e.getBoundingClientRect();
                      return {what: e.id || e.name || e.tagName, left: r.left, right: r.right,
                              width: document.documentElement.clientWidth}; });
        """,
        selector,
    )
    return result


async def _counts(pool: asyncpg.Pool, job_id: Any) -> tuple[int, int, int, int]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM review_corrections WHERE job_id = $1),"
            " (SELECT count(*) FROM review_decisions WHERE job_id = $1),"
            " (SELECT count(*) FROM job_events WHERE job_id = $1),"
            " (SELECT state_version FROM extraction_jobs WHERE id = $1)",
            job_id,
        )
    return tuple(row.values())  # type: ignore[return-value]


async def test_approve_with_reasons_left_is_refused_on_the_page_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    with threaded_server(lambda: create_app(settings_for(dsn))) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, tk)
        before = await _counts(pool, job.job_id)
        sign_in(browser, base, tk)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        browser.find_element(By.ID, "approve").click()
        refused = WebDriverWait(browser, 10).until(
            ec.presence_of_element_located((By.ID, "approve-refused"))
        )
        text = refused.text
        reasons = [li.text for li in refused.find_elements(By.CSS_SELECTOR, "li.reason-left")]
        flashes = browser.find_elements(By.CLASS_NAME, "flash")
        browser.save_screenshot(str(screenshots / "7-approve-refused.png"))
        browser.get("about:blank")
        after = await _counts(pool, job.job_id)
    assert "nothing was saved" in text
    assert any(r.startswith("gross_total_mismatch @ gross_total") for r in reasons), reasons
    assert flashes == []
    assert after == before and before[0] == 0


async def test_the_dashboard_refreshes_by_itself_and_its_counts_open_the_jobs(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    await registry_for(pool).register(tk.tenant.id, LONG_URL)
    with threaded_server(lambda: create_app(settings_for(dsn))) as base:
        sign_in(browser, base, tk)
        viewport(browser, 1280, 900, mobile=False)
        browser.get(f"{base}/console/dashboard?refresh=2")
        browser.execute_script("window.__loaded_once = true")
        assert not browser.find_elements(By.CSS_SELECTOR, 'tr[data-state="READY"]')
        # The breaker column is on screen and not covered at 1280 px.
        cell = browser.find_element(By.CSS_SELECTOR, "#endpoints td.breaker")
        placed = browser.execute_script(
            """const c = arguments[0], r = c.getBoundingClientRect();
               const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
               return {right: r.right, width: document.documentElement.clientWidth,
                       scroll: document.documentElement.scrollWidth, mine: c.contains(hit)};""",
            cell,
        )
        header = browser.find_element(By.XPATH, '//table[@id="endpoints"]//th[text()="Breaker"]')
        header_shown = header.is_displayed()
        browser.save_screenshot(str(screenshots / "8-dashboard-1280.png"))
        # A job arrives: the READY count appears without a reload.
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            r = await c.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        ready = 'tr[data-state="READY"] a.count'
        WebDriverWait(browser, 20).until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, ready), "1")
        )
        assert browser.execute_script("return window.__loaded_once === true")
        browser.save_screenshot(str(screenshots / "9-dashboard-refreshed.png"))
        # The fragment is swapped every 2 s: find the link afresh until a click lands.
        WebDriverWait(browser, 10, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda b: b.find_element(By.CSS_SELECTOR, ready).click() or True
        )
        WebDriverWait(browser, 10).until(ec.url_contains("/console/jobs?state=READY"))
        row = browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{job_id}"]')
        row.find_element(By.CSS_SELECTOR, "a.timeline").click()
        WebDriverWait(browser, 10).until(ec.url_contains(f"/console/jobs/{job_id}/timeline"))
        headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#timeline-events th")]
        browser.get("about:blank")
    assert header_shown
    assert placed["mine"] and placed["right"] <= placed["width"], placed
    assert placed["scroll"] <= placed["width"], placed
    assert headers[:2] == ["When", "Change"]


async def test_the_review_page_fits_a_390_px_screen(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    with threaded_server(lambda: create_app(settings_for(dsn))) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, tk)
        sign_in(browser, base, tk)
        viewport(browser, 390, 844, mobile=True)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        controls = boxes(browser, "main input:not([type=hidden]), main textarea, main button")
        page_width = browser.execute_script("return document.documentElement.scrollWidth")
        browser.save_screenshot(str(screenshots / "10-review-390.png"))
        browser.get("about:blank")
    assert len(controls) > 20
    outside = [b for b in controls if b["left"] < 0 or b["right"] > b["width"] + 0.5]
    assert outside == [], outside[:5]
    assert page_width <= 390
