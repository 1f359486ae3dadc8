"""Resend from the console in a real headless Chromium (issue 47, item 6 acceptance).

An operator opens Deliveries from the navigation, opens a delivered invoice's
delivery, clicks Resend; the dispatcher sends it again under the same delivery id;
the page shows the new attempt and the reference ERP receiver holds exactly one
posting for that delivery id (it answered the second arrival as a duplicate).
Screenshots go to ``results/console/``.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from tests.browser.test_console_browser import sign_in
from tests.integration.test_delivery_log import KEK
from tests.support.api import settings_for, tenant_with_key, threaded_server
from tests.support.delivery import (
    dispatcher_for,
    fetch,
    fetchval,
    job_store,
    postings,
    registry_for,
    reserve_receiver,
    succeed_jobs,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser]


async def test_resend_from_the_console_is_a_new_attempt_and_one_erp_posting(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    settings = settings_for(dsn, webhook_secret_key=KEK)
    with receiver, threaded_server(lambda: create_app(settings)) as base:
        [job_id] = await succeed_jobs(job_store(pool), tk.tenant, 1)
        dispatcher = dispatcher_for(pool)
        assert (await dispatcher.run_once()).outcomes == {"delivered": 1}
        delivery_id = await fetchval(pool, "SELECT id FROM deliveries WHERE job_id = $1", job_id)

        sign_in(browser, base, tk)
        browser.find_element(By.LINK_TEXT, "Deliveries").click()
        row = WebDriverWait(browser, 10).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-delivery="{delivery_id}"]'))
        )
        assert "delivered" in row.text
        row.find_element(By.CSS_SELECTOR, "a.open").click()
        WebDriverWait(browser, 10).until(ec.url_contains(f"/console/deliveries/{delivery_id}"))
        attempts = browser.find_elements(By.CSS_SELECTOR, "#attempts tbody tr[data-attempt]")
        assert [a.find_element(By.CLASS_NAME, "status").text for a in attempts] == ["200"]
        browser.save_screenshot(str(screenshots / "delivery-1-before-resend.png"))

        browser.find_element(By.CSS_SELECTOR, "button.resend").click()
        flash = WebDriverWait(browser, 10).until(
            ec.presence_of_element_located((By.CLASS_NAME, "flash"))
        )
        assert "Resend queued" in flash.text
        assert browser.find_element(By.ID, "delivery-state").text == "pending"

        assert (await dispatcher.run_once()).outcomes == {"delivered": 1}
        browser.get(f"{base}/console/deliveries/{delivery_id}")
        attempts = browser.find_elements(By.CSS_SELECTOR, "#attempts tbody tr[data-attempt]")
        seen = [
            (a.get_attribute("data-attempt"), a.find_element(By.CLASS_NAME, "outcome").text,
             a.find_element(By.CLASS_NAME, "status").text)
            for a in attempts
        ]  # fmt: skip
        state = browser.find_element(By.ID, "delivery-state").text
        browser.save_screenshot(str(screenshots / "delivery-2-resent.png"))
        browser.get("about:blank")
        inbox = await fetch(
            pool,
            "SELECT delivery_id, duplicates FROM erp_inbox WHERE ledger = $1",
            receiver.ledger,
        )
        posted = await postings(pool, receiver.ledger)
        arrivals = list(receiver.stats.delivery_ids)
    assert seen == [("1", "delivered", "200"), ("2", "delivered", "200")]
    assert state == "delivered"
    # The same webhook-id arrived twice; the ERP posted once and absorbed the resend.
    assert arrivals == [str(delivery_id)] * 2
    assert inbox == [{"delivery_id": str(delivery_id), "duplicates": 1}]
    assert posted == {job_id: 1}
    for name in ("delivery-1-before-resend", "delivery-2-resent"):
        assert (screenshots / f"{name}.png").stat().st_size > 10_000
