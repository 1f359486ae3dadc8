"""The page view in a real headless Chromium (issue 43 acceptance): the reviewer sees
the page image of an uploaded PDF with the evidence box of a corrected field.

Where the box must be is worked out from how the test PDF was drawn
(tests/support/pdfs.py: Courier 8 pt, first baseline 40 pt below the top, a line per
10 pt, from x = 30 pt, 4.8 pt a character), not from the code that places boxes.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import asyncpg
import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from pipeline.invoice import decimal_mark, read_number
from tests.browser.test_console_browser import sign_in
from tests.support.api import settings_for, tenant_with_key, threaded_server
from tests.support.file_review import (
    EVIDENCE_BOX_GEOMETRY,
    evidence_line,
    file_awaiting_review,
    gross_evidence,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser]

WIDTH, HEIGHT = 595.2756, 841.8898  # A4 in points
CHAR, LEFT, FIRST_BASELINE, LEADING = 4.8, 30.0, 40.0, 10.0


def _box(browser: webdriver.Chrome, field: str) -> dict[str, float]:
    """The field's first evidence box, in points of the page, once the image is shown."""
    found: dict[str, float] = WebDriverWait(browser, 10).until(
        lambda b: b.execute_script(EVIDENCE_BOX_GEOMETRY, field, WIDTH, HEIGHT)
    )
    return found


def _drawn(ocr_text: str, kept_line: str, quote: str) -> tuple[float, float, float]:
    """Where ``quote`` of the kept line ``kept_line`` was drawn: left, right, baseline."""
    lines = ocr_text.split("\f")[0].split("\n")
    [index] = [i for i, line in enumerate(lines) if line.split() == kept_line.split()]
    column = lines[index].index(quote)
    left = LEFT + CHAR * column
    return left, left + CHAR * len(quote), FIRST_BASELINE + LEADING * index


async def test_the_reviewer_sees_the_page_with_the_evidence_box_of_a_corrected_field(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path, tmp_path: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    settings = settings_for(dsn, state_dir=tmp_path)
    with threaded_server(lambda: create_app(settings)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            job = await file_awaiting_review(pool, c, tk)
        sign_in(browser, base, tk)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        before = _box(browser, "gross_total")

        field = browser.find_element(By.ID, "value-ev-gross_total")
        field.clear()
        field.send_keys(job.right_gross)
        browser.find_element(By.ID, "save").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CLASS_NAME, "flash")))
        after = _box(browser, "gross_total")
        browser.save_screenshot(str(screenshots / "7-page-view-corrected.png"))

        # Hovering the box lights its field's row; hovering the row lights the box.
        row = browser.find_element(By.ID, "field-gross_total")
        box = browser.find_element(By.CSS_SELECTOR, 'rect.evbox[data-field="gross_total"]')
        ActionChains(browser).move_to_element(box).perform()
        row_lit = "linked" in (row.get_attribute("class") or "")
        ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
        row_unlit = "linked" not in (row.get_attribute("class") or "")
        ActionChains(browser).move_to_element(row.find_element(By.TAG_NAME, "th")).perform()
        box_lit = "linked" in (box.get_attribute("class") or "")

        # Zoom: the page grows, the box stays over the same place on it.
        browser.find_element(By.ID, "zoom-in").click()
        zoomed = _box(browser, "gross_total")
        browser.get("about:blank")
    evidence = await gross_evidence(pool, job.job_id)
    kept_line = evidence_line(job.kept_text, evidence)
    # The correction was grounded: the evidence is where the right total is printed.
    mark = decimal_mark(job.kept_text)
    assert read_number(evidence["quote"], mark) == Decimal(job.right_gross)
    left, right, baseline = _drawn(job.invoice.ocr_text, kept_line, evidence["quote"])
    # The box covers the printed amount: its ends within a point, its middle on the
    # baseline's text (a line is 10 pt: a box on a neighbouring line is far off).
    assert after["left"] == pytest.approx(left, abs=1.0)
    assert after["right"] == pytest.approx(right, abs=1.0)
    assert after["top"] < baseline < after["bottom"]
    assert after["top"] > baseline - 8 and after["bottom"] < baseline + 4
    # Before the correction the box was over the row amount the model took.
    assert (
        abs(before["top"] - after["top"]) >= LEADING - 0.5
        or abs(before["left"] - after["left"]) > CHAR
    )
    assert row_lit and row_unlit and box_lit
    assert zoomed["width"] == pytest.approx(after["width"] * 1.25, rel=0.02)
    assert zoomed["left"] == pytest.approx(after["left"], abs=0.5)
    assert zoomed["top"] == pytest.approx(after["top"], abs=0.5)
    assert (screenshots / "7-page-view-corrected.png").stat().st_size > 10_000
