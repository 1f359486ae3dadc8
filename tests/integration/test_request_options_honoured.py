"""Request options that reach the attempt (issue 46, item 5), on real PostgreSQL, with
real drivers over the fake provider (a real HTTP process on loopback) and Debian's
tesseract:

* ``ocr_languages`` is the languages the job's scanned pages are read with: a German
  scan read as English loses its umlauts and ß; a language not installed, or a value
  that names no language, is 422 ``invalid_option`` and nothing is written;
* ``model_policy`` names the pool the attempt runs on (with a hosted provider: the
  model asked for); one naming no configured pool is 422 ``unknown_model_policy``;
* ``locale`` is no longer offered: refused as an unknown option, never kept inert.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.extraction import document_in_prompt
from pipeline.jobs import JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    assert_problem,
    count_rows,
    settings_for,
    submission,
    tenant_with_key,
)
from tests.support.drivers import run_document_driver
from tests.support.scans import encode, render_text

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"
GERMAN = "Rechnung Größe Straße Müller\nGebühr Äpfel Übergröße 12,50"


async def test_locale_is_refused_not_kept_inert(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(
            JOBS, json=submission(options={"locale": "de-CH"}), headers=tk.headers
        )
    body = assert_problem(r, 422, "unknown_option")
    assert body["detail"] == "unknown option(s) 'locale'; supported options: ocr_languages"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("deu+tlh", "not installed: tlh"),
        (["fin"], "not installed: fin"),  # tesseract may have it; the deployment lists it not
        ("osd", "no tesseract language name"),
        ("", "names no language"),
        (42, "'+'-joined text or a list"),
        (["deu", 7], "'+'-joined text or a list"),
    ],
)
async def test_ocr_languages_the_deployment_does_not_install_are_422(
    pool: asyncpg.Pool, dsn: str, value: Any, why: str
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *WRITTEN_TABLES, "job_options")
    settings = settings_for(dsn, ocr_languages="eng+deu+fra")
    async with asgi_client(create_app(settings, pool=pool)) as client:
        as_json = await client.post(
            JOBS, json=submission(options={"ocr_languages": value}), headers=tk.headers
        )
        as_file = await client.post(
            JOBS,
            files={"document": ("a.png", encode(render_text("INVOICE 1")), "image/png")},
            data={"metadata": json.dumps({"options": {"ocr_languages": value}})},
            headers=tk.headers,
        )
    for r in (as_json, as_file):
        body = assert_problem(r, 422, "invalid_option")
        assert why in body["detail"] and "installed: eng+deu+fra" in body["detail"]
        assert [e["loc"] for e in body["errors"]] == [["body", "options", "ocr_languages"]]
    assert await count_rows(pool, *WRITTEN_TABLES, "job_options") == before


async def test_a_model_policy_naming_no_configured_pool_is_422(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    bare = settings_for(dsn)
    pooled = settings_for(dsn, model_pools=("short", "long"))
    async with asgi_client(create_app(bare, pool=pool)) as client:
        refused = await client.post(JOBS, json=submission(model_policy="long"), headers=tk.headers)
    async with asgi_client(create_app(pooled, pool=pool)) as client:
        unknown = await client.post(JOBS, json=submission(model_policy="huge"), headers=tk.headers)
        after = await count_rows(pool, *WRITTEN_TABLES)
        routed = await client.post(JOBS, json=submission(model_policy="long"), headers=tk.headers)
        default = await client.post(JOBS, json=submission(), headers=tk.headers)
    body = assert_problem(refused, 422, "unknown_model_policy")
    assert body["detail"] == "model_policy 'long' names no configured pool; configured: default"
    body = assert_problem(unknown, 422, "unknown_model_policy")
    assert body["detail"].endswith("configured: default, short, long")
    assert [e["loc"] for e in body["errors"]] == [["body", "model_policy"]]
    assert after == before
    assert routed.status_code == 202 and default.status_code == 202, routed.text
    async with pool.acquire() as conn:
        policy = await conn.fetchval(
            "SELECT model_policy FROM extraction_jobs WHERE id = $1",
            uuid.UUID(routed.json()["job_id"]),
        )
    assert policy == "long"


async def test_the_model_policy_is_the_model_the_provider_is_asked_for(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path, model_pools=("big-model",))
    tk = await tenant_with_key(pool)
    texts = {
        "big-model": "INVOICE B-1 total 10.00 EUR",
        "fake-model": "INVOICE D-2 total 10.00 EUR",
    }
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for model, text in texts.items():
            extra = {"model_policy": model} if model != "fake-model" else {}
            r = await client.post(JOBS, json=submission(text, **extra), headers=tk.headers)
            assert r.status_code == 202, r.text
    asked: dict[str, set[str]] = {}

    def answer(body: dict[str, Any]) -> Any:
        shown = document_in_prompt(body.get("messages", [])) or ""
        for model, text in texts.items():
            if text.split()[1] in shown:
                asked.setdefault(model, set()).add(str(body.get("model")))
        return "{}"

    _, calls = await run_document_driver(pool, settings, 2, answer=answer)
    assert calls >= 2
    # The driver's engine is configured for "fake-model"; the policy's job asked for its own.
    assert asked == {"big-model": {"big-model"}, "fake-model": {"fake-model"}}


async def test_ocr_languages_are_the_languages_the_jobs_scan_is_read_with(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = settings_for(dsn, state_dir=tmp_path)
    png = encode(render_text(GERMAN))
    jobs: dict[str, uuid.UUID] = {}
    async with asgi_client(create_app(settings, pool=pool)) as client:
        for name in ("eng", "deu"):  # a tenant each: one file, two documents
            tk = await tenant_with_key(pool)
            r = await client.post(
                JOBS,
                files={"document": ("scan.png", png, "image/png")},
                data={"metadata": json.dumps({"options": {"ocr_languages": name}})},
                headers=tk.headers,
            )
            assert r.status_code == 202, r.text
            jobs[name] = uuid.UUID(r.json()["job_id"])
    # One attempt each, under a lease that outlasts the first load of the OCR word lists
    # (30-40 s for the ten configured languages on a loaded machine: pipeline/worker/ocr_proof.py).
    once = RetryPolicy(max_attempts=1, base_seconds=0.05, cap_seconds=0.2)
    store = JobStore(pool, Settings(lease_seconds=300), policy=once)
    await run_document_driver(pool, settings, 2, store=store, timeout=300)
    async with pool.acquire() as conn:
        kept = {
            name: await conn.fetchval(
                "SELECT t.content FROM document_texts t JOIN extraction_jobs j"
                " ON j.document_id = t.document_id WHERE j.id = $1",
                job,
            )
            for name, job in jobs.items()
        }
    # Tesseract's English model has no ß or umlauts; its German one reads them. Without
    # the option both would be read with the configured list (German in it).
    assert "Straße" in kept["deu"] and "Müller" in kept["deu"]
    assert "ß" not in kept["eng"] and "ü" not in kept["eng"] and "Rechnung" in kept["eng"]


def test_the_settings_model_policies_start_with_default() -> None:
    assert Settings(model_pools=("a", "default", "b")).model_policies() == ("default", "a", "b")
