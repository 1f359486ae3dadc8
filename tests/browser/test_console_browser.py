"""The review console in a real headless Chromium (issue 18 acceptance).

A reviewer signs in with an API key, opens the queue, opens an invoice whose
gross total the model got wrong, sees the evidence highlighted, corrects the
gross total, approves with the keyboard, and the reference ERP receiver records
exactly one posting carrying the corrected value; the same for a misread line
item's amount. Screenshots go to ``results/console/``. Hostile OCR text renders
inert in the same browser.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from tests.integration.test_api_console import HOSTILE
from tests.support.api import TenantKey, settings_for, tenant_with_key, threaded_server
from tests.support.console import invoice_awaiting_review
from tests.support.delivery import dispatcher_for, fetch, postings, registry_for, reserve_receiver

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def sign_in(browser: webdriver.Chrome, base: str, tk: TenantKey) -> None:
    browser.get(f"{base}/console/login")
    browser.find_element(By.ID, "api_key").send_keys(tk.key)
    browser.find_element(By.ID, "login").click()
    WebDriverWait(browser, 10).until(ec.url_contains("/console/queue"))


async def test_reviewer_corrects_the_gross_total_and_the_erp_posts_it_once(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    settings = settings_for(dsn, delivery_allow_loopback_http=True)
    with receiver, threaded_server(lambda: create_app(settings)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, tk)
        sign_in(browser, base, tk)
        row = browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{job.job_id}"]')
        assert "gross_total_mismatch" in row.text
        browser.save_screenshot(str(screenshots / "1-queue.png"))
        row.find_element(By.CSS_SELECTOR, "a.open").click()
        WebDriverWait(browser, 10).until(ec.url_contains(str(job.job_id)))

        # The evidence of the gross total is marked in the OCR text and linked.
        anchor = browser.find_element(By.ID, "ev-gross_total")
        mark = anchor.find_element(By.XPATH, "ancestor-or-self::mark[1]")
        assert "gross_total" in (mark.get_attribute("data-fields") or "")
        background = mark.value_of_css_property("background-color")
        assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
        marks = browser.find_elements(By.CSS_SELECTOR, "mark.ev")
        assert len(marks) >= 5
        link = browser.find_element(By.CSS_SELECTOR, '#field-gross_total a[href="#ev-gross_total"]')
        link.click()
        assert browser.current_url.endswith("#ev-gross_total")
        reason = browser.find_element(By.CSS_SELECTOR, "#field-gross_total .reason")
        assert "gross_total_mismatch" in reason.text
        browser.save_screenshot(str(screenshots / "2-review.png"))

        box = browser.find_element(By.ID, "value-ev-gross_total")
        assert box.get_attribute("value") != job.right_gross
        box.clear()
        box.send_keys(job.right_gross)
        browser.save_screenshot(str(screenshots / "3-corrected.png"))
        # Approve with the keyboard shortcut (focus outside the input first).
        browser.find_element(By.TAG_NAME, "h1").click()
        ActionChains(browser).send_keys("a").perform()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CLASS_NAME, "flash")))
        assert f"Approved job {job.job_id}" in browser.find_element(By.CLASS_NAME, "flash").text
        browser.save_screenshot(str(screenshots / "4-approved.png"))

        dispatcher = dispatcher_for(pool)
        browser.get("about:blank")  # close the page's event stream before the server stops
        for _ in range(3):
            await dispatcher.run_once()
        posted = await postings(pool, receiver.ledger)
        invoices = await fetch(
            pool, "SELECT invoice FROM erp_postings WHERE ledger = $1", receiver.ledger
        )
    assert posted == {job.job_id: 1}
    assert [i["invoice"]["gross_total"]["value"] for i in invoices] == [job.right_gross]
    async with pool.acquire() as conn:
        state = await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", job.job_id)
        corrections = await conn.fetch(
            "SELECT changes, to_state FROM review_corrections WHERE job_id = $1", job.job_id
        )
    assert state == "SUCCEEDED"
    assert [(c["to_state"], c["changes"][0]["after"]) for c in corrections] == [
        ("SUCCEEDED", job.right_gross)
    ]
    for name in ("1-queue", "2-review", "3-corrected", "4-approved"):
        assert (screenshots / f"{name}.png").stat().st_size > 10_000


def _misread_line_amount(result: dict[str, Any]) -> None:
    item = result["line_items"][0]
    item["line_amount"] = str(Decimal(item["line_amount"]) + 10)


async def test_reviewer_corrects_a_line_item_and_the_erp_posts_the_corrected_row_once(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    settings = settings_for(dsn, delivery_allow_loopback_http=True)
    with receiver, threaded_server(lambda: create_app(settings)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, tk, misread=_misread_line_amount)
        right = job.invoice.truth.line_items[0].line_amount
        sign_in(browser, base, tk)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        row = browser.find_element(By.ID, "field-line_items-0")
        assert "line_amount_mismatch" in row.text
        assert row.find_elements(By.CSS_SELECTOR, 'a[href="#ev-line_items-0"]')
        box = row.find_element(By.CSS_SELECTOR, 'input[name="value.line_items[0].line_amount"]')
        assert Decimal(box.get_attribute("value") or "0") == right + 10
        box.clear()
        box.send_keys(str(right))
        browser.save_screenshot(str(screenshots / "6-line-item-corrected.png"))
        browser.find_element(By.ID, "approve").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CLASS_NAME, "flash")))
        assert f"Approved job {job.job_id}" in browser.find_element(By.CLASS_NAME, "flash").text
        browser.get("about:blank")
        dispatcher = dispatcher_for(pool)
        for _ in range(3):
            await dispatcher.run_once()
        posted = await postings(pool, receiver.ledger)
        invoices = await fetch(
            pool, "SELECT invoice FROM erp_postings WHERE ledger = $1", receiver.ledger
        )
    assert posted == {job.job_id: 1}
    [posting] = invoices
    assert Decimal(posting["invoice"]["line_items"][0]["line_amount"]) == right
    async with pool.acquire() as conn:
        changes = await conn.fetchval(
            "SELECT changes FROM review_corrections WHERE job_id = $1", job.job_id
        )
    assert [(c["field"], Decimal(c["after"]), c["grounded"]) for c in changes] == [
        ("line_items[0].line_amount", right, True)
    ]


async def test_hostile_ocr_text_renders_inert_in_the_browser(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    with threaded_server(lambda: create_app(settings_for(dsn))) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, tk, text=HOSTILE)
        sign_in(browser, base, tk)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        document = browser.find_element(By.CSS_SELECTOR, "section.document")
        text = document.text
        browser.save_screenshot(str(screenshots / "5-hostile.png"))
        pwned = browser.execute_script("return window.__pwned === undefined")
        try:
            alert = browser.switch_to.alert.text
        except NoAlertPresentException:
            alert = None
        links = document.find_elements(By.TAG_NAME, "a")
        images = document.find_elements(By.TAG_NAME, "img")
        scripts_ran = browser.execute_script(
            "return Array.from(document.scripts).map(s => s.src || 'inline')"
        )
        browser.get("about:blank")
    assert pwned is True and alert is None
    assert links == [] and images == []
    assert scripts_ran == [f"{base}/console/static/console.js"]
    assert "<script>window.__pwned = 1; alert(1)</script>" in text
    assert '<a href="javascript:alert(2)">javascript:alert(2)</a>' in text
    assert "<!-- hidden comment --><img src=x onerror=alert(3)>" in text
    assert "⟨U+202E⟩gnp.exe⟨U+202C⟩" in text and "zero⟨U+200B⟩width" in text
