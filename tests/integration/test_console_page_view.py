"""The page view of the review console (issue 43): a file's pages as images with the
evidence of each value boxed on them, over real HTTP with real PostgreSQL and the
embedded document store. Page images are tenant-scoped like every console read."""

from __future__ import annotations

import io
import re
from pathlib import Path

import asyncpg
import httpx
import pytest
from PIL import Image

from pipeline.api import create_app
from pipeline.documents.page_png import MAX_SIDE
from tests.support.api import loopback_server, settings_for, tenant_with_key
from tests.support.console import console_login, invoice_awaiting_review, job_page
from tests.support.file_review import file_awaiting_review, scan_awaiting_review

pytestmark = pytest.mark.integration

_RECT = re.compile(r'<rect class="evbox"[^>]*data-field="([^"]+)"[^>]*y="([\d.]+)"')


async def test_a_page_image_is_a_png_for_its_tenant_only(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    owner = await tenant_with_key(pool, scopes=("jobs", "review"))
    other = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    app = create_app(settings_for(dsn, state_dir=tmp_path), pool=pool)
    async with loopback_server(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            job = await file_awaiting_review(pool, c, owner)
            text_job = await invoice_awaiting_review(pool, c, owner, seed=4)
            pages = job.kept_text.count("\f") + 1
            anonymous = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
            await console_login(c, owner)
            first = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
            past = await c.get(f"/console/jobs/{job.job_id}/pages/{pages + 1}.png")
            zero = await c.get(f"/console/jobs/{job.job_id}/pages/0.png")
            of_text = await c.get(f"/console/jobs/{text_job.job_id}/pages/1.png")
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            await console_login(c, other)
            theirs = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/console/login"
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "image/png"
    assert first.headers["cache-control"] == "no-store"
    image = Image.open(io.BytesIO(first.content))
    assert image.format == "PNG" and max(image.size) == MAX_SIDE
    assert image.height > image.width  # A4 upright
    for refused in (past, zero, of_text, theirs):
        assert refused.status_code == 404
        assert refused.headers["content-type"].startswith("text/html")
        assert b"\x89PNG" not in refused.content


async def test_a_file_is_reviewed_on_its_pages_and_a_text_keeps_its_view(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn, state_dir=tmp_path), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job = await file_awaiting_review(pool, c, tk)
        text_job = await invoice_awaiting_review(pool, c, tk, seed=4)
        await console_login(c, tk)
        html, _ = await job_page(c, job.job_id)
        text_html, _ = await job_page(c, text_job.job_id)
    assert f'<img src="/console/jobs/{job.job_id}/pages/1.png"' in html
    fields = {field for field, _ in _RECT.findall(html)}
    assert {"invoice_number", "gross_total", "supplier.name"} <= fields
    # The text the file was read as stays on the page, folded away.
    assert '<details class="text-view">' in html and 'id="ev-gross_total"' in html
    # A pasted text: today's view, no page images, no boxes.
    assert "<img" not in text_html and "evbox" not in text_html and "<details" not in text_html
    assert 'id="ev-gross_total"' in text_html


@pytest.mark.ocr
async def test_a_scan_is_shown_as_ocr_read_it_with_its_values_boxed(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """A scan fed sideways and 2° askew, OCR'd (about 5 s): its page is served upright
    and level, the frame its kept words' boxes are fractions of, with the values boxed."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn, state_dir=tmp_path), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
        job, drawn = await scan_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        html, _ = await job_page(c, job.job_id)
        page = await c.get(f"/console/jobs/{job.job_id}/pages/1.png")
    width, height = drawn.skewed  # the canvas the skew grew the drawn page to
    assert Image.open(io.BytesIO(job.pdf)).size == (height, width)  # fed sideways
    assert page.status_code == 200, page.text
    image = Image.open(io.BytesIO(page.content))
    # served upright: the drawn page's proportions, not the file's
    assert max(image.size) == MAX_SIDE
    assert image.width / image.height == pytest.approx(width / height, abs=0.002)
    assert f'<img src="/console/jobs/{job.job_id}/pages/1.png"' in html
    fields = {field for field, _ in _RECT.findall(html)}
    assert {"invoice_number", "gross_total", "supplier.name"} <= fields
