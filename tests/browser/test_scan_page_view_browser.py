"""The page view of a scan in a real headless Chromium (issue 43 acceptance): the
reviewer sees the page image of an uploaded scan, fed sideways and 2° askew, upright
and level as OCR read it, with the evidence box of a corrected field over the printed
value.

Where the box must be is worked out from how the test scan was drawn
(tests/support/scans.py, :class:`~tests.support.file_review.DrawnScan`: DejaVu Sans
Mono 9 pt at 300 dpi, a third of an inch of margin, a line every ``pitch`` pixels, a
character every ``advance``; then turned by the skew on a grown canvas, then a
quarter turn), not from the code that places boxes or turns pages: levelled again,
the drawing is back where it was, shifted by half of what the canvas grew.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import asyncpg
import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from pipeline.api import create_app
from pipeline.invoice import decimal_mark, read_number
from tests.browser.test_console_browser import sign_in
from tests.support.api import settings_for, tenant_with_key, threaded_server
from tests.support.file_review import (
    EVIDENCE_BOX_GEOMETRY,
    DrawnScan,
    evidence_line,
    gross_evidence,
    scan_awaiting_review,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.ocr]

# The share of the image's pixels under the field's box that are ink (dark), as the
# browser shows them: whether the box lies over printed text on the image itself.
_INK = """
const [field] = arguments;
const img = document.querySelector('figure.page-image img');
const box = document.querySelector('rect.evbox[data-field="' + field + '"]');
const i = img.getBoundingClientRect(), b = box.getBoundingClientRect();
const kx = img.naturalWidth / i.width, ky = img.naturalHeight / i.height;
const x = Math.round((b.left - i.left) * kx), y = Math.round((b.top - i.top) * ky);
const w = Math.max(1, Math.round(b.width * kx)), h = Math.max(1, Math.round(b.height * ky));
const canvas = document.createElement('canvas');
canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
const ctx = canvas.getContext('2d');
ctx.drawImage(img, 0, 0);
const data = ctx.getImageData(x, y, w, h).data;
let dark = 0;
for (let k = 0; k < data.length; k += 4) { if (data[k] < 100) { dark += 1; } }
return {ink: dark / (w * h), natural: img.naturalWidth / img.naturalHeight};
"""


def _box(browser: webdriver.Chrome, field: str, drawn: DrawnScan) -> dict[str, float]:
    """The field's first evidence box, in pixels of the levelled scan, once shown."""
    width, height = drawn.skewed
    found: dict[str, float] = WebDriverWait(browser, 10).until(
        lambda b: b.execute_script(EVIDENCE_BOX_GEOMETRY, field, width, height)
    )
    return found


def _drawn(
    drawn: DrawnScan, text: str, kept_line: str, quote: str
) -> tuple[float, float, float, float]:
    """Where ``quote`` of the kept line ``kept_line`` was drawn, in pixels of the page
    levelled again: left, right, and the top and bottom of its line."""
    lines = text.split("\n")
    [index] = [i for i, line in enumerate(lines) if line.split() == kept_line.split()]
    column = lines[index].index(quote)
    dx = (drawn.skewed[0] - drawn.upright[0]) / 2
    dy = (drawn.skewed[1] - drawn.upright[1]) / 2
    left = drawn.margin + drawn.advance * column + dx
    top = drawn.margin + drawn.pitch * index + dy
    return left, left + drawn.advance * len(quote), top, top + drawn.pitch


async def test_the_reviewer_sees_the_scan_with_the_evidence_box_of_a_corrected_field(
    pool: asyncpg.Pool, dsn: str, browser: webdriver.Chrome, screenshots: Path, tmp_path: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    settings = settings_for(dsn, state_dir=tmp_path)
    with threaded_server(lambda: create_app(settings)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            job, drawn = await scan_awaiting_review(pool, c, tk)
        sign_in(browser, base, tk)
        browser.get(f"{base}/console/jobs/{job.job_id}")
        before = _box(browser, "gross_total", drawn)

        field = browser.find_element(By.ID, "value-ev-gross_total")
        field.clear()
        field.send_keys(job.right_gross)
        browser.find_element(By.ID, "save").click()
        WebDriverWait(browser, 10).until(ec.presence_of_element_located((By.CLASS_NAME, "flash")))
        after = _box(browser, "gross_total", drawn)
        shown = browser.execute_script(_INK, "gross_total")
        browser.save_screenshot(str(screenshots / "8-scan-page-view-corrected.png"))
        browser.get("about:blank")
    evidence = await gross_evidence(pool, job.job_id)
    kept_line = evidence_line(job.kept_text, evidence)
    # The correction was grounded: the evidence is where the right total is printed.
    mark = decimal_mark(job.kept_text)
    assert read_number(evidence["quote"], mark) == Decimal(job.right_gross)
    left, right, top, bottom = _drawn(drawn, job.invoice.ocr_text, kept_line, evidence["quote"])
    # The box covers the printed amount: its ends within half a character, its middle
    # on the drawn line (a line is ``pitch`` high: a neighbouring line is far off).
    assert after["left"] == pytest.approx(left, abs=drawn.advance / 2)
    assert after["right"] == pytest.approx(right, abs=drawn.advance / 2)
    assert top < (after["top"] + after["bottom"]) / 2 < bottom
    assert after["top"] > top - drawn.pitch / 2 and after["bottom"] < bottom + drawn.pitch / 2
    # The image under it is the scan levelled, upright (the file is sideways), and the
    # box holds the amount's ink on it.
    assert shown["natural"] == pytest.approx(drawn.skewed[0] / drawn.skewed[1], abs=0.002)
    assert shown["ink"] > 0.08, shown
    # Before the correction the box was over the row amount the model took.
    assert (
        abs(before["top"] - after["top"]) >= drawn.pitch / 2
        or abs(before["left"] - after["left"]) > drawn.advance
    )
    assert (screenshots / "8-scan-page-view-corrected.png").stat().st_size > 10_000
