"""Bounded work per document (issue 41): refused at the intake, failed by name in a driver.

One invoice whose text was a single 100,000-character line kept a task driver busy
until it was replaced, five times, and the job failed ten minutes later with nothing
said. Now the intake refuses a document over a limit before anything is written (413
for size, 422 for shape, the limit and the document's value named), within 2 s of
CPU; and a driver that meets one accepted before the limits existed fails its job
terminally, naming the limit, without calling the engine.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import httpx
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices import Variant, generate_invoice
from pipeline.api import create_app
from pipeline.extraction import DocumentLimits, OpenAICompatibleEngine
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.settings import Settings
from pipeline.worker import AttemptRunner, WorkerConfig
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    count_rows,
    settings_for,
    submission,
    tenant_with_key,
)
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"
ONE_MB = "12,50 Widget 3 x 4,17 " * (1_000_000 // 22)  # a table read without layout
LONG_LINE = ("Pos 1 Service 3 x 4,17 = 12,51 EUR " * 3000)[:100_000]


def _problem(r: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert (body["status"], body["reason"], body["type"]) == (
        status,
        reason,
        f"urn:fenceline:problem:{reason}",
    )
    return body


async def _post(
    pool: asyncpg.Pool, settings: Settings, **request: Any
) -> tuple[httpx.Response, float]:
    """One submission; the response and the CPU seconds the process spent on it."""
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        started = time.process_time()
        r = await client.post(JOBS, headers=tk.headers, **request)
        return r, time.process_time() - started


async def test_a_1_mb_single_line_document_is_413_within_2_s_of_cpu(
    pool: asyncpg.Pool, dsn: str
) -> None:
    before = await count_rows(pool, *WRITTEN_TABLES)
    assert 999_000 < len(ONE_MB.encode()) <= 1_000_000 and "\n" not in ONE_MB
    r, cpu = await _post(pool, settings_for(dsn), json=submission(ONE_MB))
    body = _problem(r, 413, "document_over_limit")
    assert cpu < 2.0
    assert (body["limit"], body["allowed"], body["actual"]) == (
        "document_bytes",
        256 * 1024,
        len(ONE_MB.encode()),
    )
    assert str(len(ONE_MB.encode())) in body["detail"] and "262144" in body["detail"]
    # a body past the request limit (1 MiB) is refused before it is read
    r, cpu = await _post(pool, settings_for(dsn), json=submission(ONE_MB + ONE_MB[:60_000]))
    _problem(r, 413, "body_too_large")
    assert cpu < 2.0
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_a_100000_character_line_is_422_within_2_s_of_cpu(
    pool: asyncpg.Pool, dsn: str
) -> None:
    before = await count_rows(pool, *WRITTEN_TABLES)
    text = "INVOICE 17\nTotal 12,51 EUR\n" + LONG_LINE
    for request in (
        {"json": submission(text)},
        {"files": {"document": ("scan.txt", text.encode(), "text/plain")}},
    ):
        r, cpu = await _post(pool, settings_for(dsn), **request)
        body = _problem(r, 422, "document_over_limit")
        assert cpu < 2.0
        assert (body["limit"], body["allowed"], body["actual"], body["line"]) == (
            "line_chars",
            4000,
            100_000,
            3,
        )
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_lines_and_tokens_are_limits_of_their_own(pool: asyncpg.Pool, dsn: str) -> None:
    r, _ = await _post(pool, settings_for(dsn), json=submission("1\n" * 10_000))
    body = _problem(r, 422, "document_over_limit")
    assert (body["limit"], body["allowed"], body["actual"]) == ("lines", 10_000, 10_001)
    settings = settings_for(dsn, max_document_tokens=1000, bytes_per_token=2.0)
    r, _ = await _post(pool, settings, json=submission("x" * 2001))
    body = _problem(r, 413, "document_over_limit")
    assert (body["limit"], body["allowed"], body["actual"]) == ("document_tokens", 1000, 1001)


async def test_every_generated_invoice_shape_is_accepted(pool: asyncpg.Pool, dsn: str) -> None:
    """The defaults pass the largest generated invoices (200 items, every layout)."""
    for seed, layout in enumerate(("table", "stacked", "prose", "ledger", "columns", "keyvalue")):
        inv = generate_invoice(seed, Variant.CLEAN, line_items=200, layouts=(layout,))
        r, _ = await _post(pool, settings_for(dsn), json=submission(inv.ocr_text))
        assert r.status_code == 202, r.text


async def _attempt(pool: asyncpg.Pool, text: str, limits: DocumentLimits) -> tuple[Any, Any, int]:
    """Accept ``text`` as before the limits existed, run one attempt under ``limits``:
    the report, the job row and how many engine calls were made."""
    store = JobStore(pool, Settings(lease_seconds=30))
    tenant = await new_tenant(pool)
    accepted = await store.accept(AcceptRequest(tenant.id, "over-limit", DocumentIn(text)))
    with FakeProvider(answer=lambda _: "{}") as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            config = WorkerConfig(worker_id="bounded", limits=limits)
            [lease] = await store.claim("bounded", limit=1)
            report = await AttemptRunner(store, engine, config).run(lease)
        calls = len(fake.calls())
    async with pool.acquire() as conn:
        job = await conn.fetchrow(
            "SELECT state, terminal_reason, last_error_class FROM extraction_jobs WHERE id = $1",
            accepted.job_id,
        )
    return report, job, calls


async def test_a_driver_fails_an_accepted_over_limit_document_by_name(pool: asyncpg.Pool) -> None:
    started = time.process_time()
    report, job, calls = await _attempt(pool, "INVOICE 17\n" + LONG_LINE, DocumentLimits())
    assert time.process_time() - started < 2.0
    assert report.outcome == "failed_terminal"
    assert "line_chars is 100000 (line 2), at most 4000" in report.detail
    assert (job["state"], job["terminal_reason"], job["last_error_class"]) == (
        "FAILED_TERMINAL",
        "document_over_limit",
        "document_over_limit",
    )
    assert calls == 0


async def test_a_spent_cpu_budget_fails_the_job_by_name(pool: asyncpg.Pool) -> None:
    inv = generate_invoice(3, Variant.CLEAN)
    report, job, calls = await _attempt(pool, inv.ocr_text, DocumentLimits(cpu_seconds=1e-9))
    assert report.outcome == "failed_terminal"
    assert "preparing the call spent more than" in report.detail
    assert (job["state"], job["last_error_class"]) == (
        "FAILED_TERMINAL",
        "extraction_budget_exceeded",
    )
    assert calls == 0
