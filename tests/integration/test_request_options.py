"""Request options that do what they say (issue 46, item 5): a ``schema_version``
no contract implements is refused with 422 naming the supported ones, never
accepted (202) and served with the default; JSON and multipart alike. The
``options`` of a request are stored with its job, in the accepting transaction,
and ``explain`` shows them; an option name the system does not know is refused
with 422 naming it and the supported ones, and nothing is written."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.invoice import SUPPORTED_OPTIONS, SUPPORTED_SCHEMA_VERSIONS
from pipeline.jobs import JobStore, render_explain
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    assert_problem,
    count_rows,
    settings_for,
    submission,
    tenant_with_key,
)
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

JOBS = "/v1/extraction-jobs"


@pytest.mark.parametrize("version", [0, 2, 999])
async def test_an_unsupported_schema_version_is_422_naming_the_supported_ones(
    pool: asyncpg.Pool, dsn: str, version: int
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        as_json = await client.post(
            JOBS, json=submission(schema_version=version), headers=tk.headers
        )
        as_file = await client.post(
            JOBS,
            files={"document": ("a.txt", b"INVOICE 1 total 10.00 EUR", "text/plain")},
            data={"metadata": json.dumps({"schema_version": version})},
            headers=tk.headers,
        )
    for r in (as_json, as_file):
        assert r.status_code == 422, r.text
        [error] = [e for e in r.json()["errors"] if e["loc"][-1] == "schema_version"]
        assert "supported versions: 1, 3" in error["msg"]
    assert await count_rows(pool, *WRITTEN_TABLES) == before


@pytest.mark.parametrize("version", SUPPORTED_SCHEMA_VERSIONS)
async def test_a_supported_schema_version_is_accepted_and_recorded(
    pool: asyncpg.Pool, dsn: str, version: int
) -> None:
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(JOBS, json=submission(schema_version=version), headers=tk.headers)
        assert r.status_code == 202, r.text
        job = await client.get(r.headers["Location"], headers=tk.headers)
    assert job.json()["schema_version"] == version


async def test_options_are_stored_with_the_job_and_shown_by_explain(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    options = {"ocr_languages": ["deu", "fra"]}
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        body = submission(options=options)
        r = await client.post(JOBS, json=body, headers=tk.headers)
        assert r.status_code == 202, r.text
        with_options = uuid.UUID(r.json()["job_id"])
        again = await client.post(
            JOBS,
            json=body,
            headers={**tk.headers, "Idempotency-Key": r.headers["Idempotency-Key"]},
        )
        plain = await client.post(JOBS, json=submission(), headers=tk.headers)
    assert again.status_code == 200 and again.json()["job_id"] == str(with_options)
    store = JobStore(pool)
    explained = await store.explain(with_options)
    assert explained["options"] == options
    text = render_explain(explained)
    assert 'options {"ocr_languages": ["deu", "fra"]}' in text
    assert "schema_version 1  model_policy default" in text
    assert (await store.explain(uuid.UUID(plain.json()["job_id"])))["options"] == {}
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT job_id, tenant_id FROM job_options")
    assert [(r["job_id"], r["tenant_id"]) for r in rows] == [(with_options, tk.tenant.id)]


async def test_the_job_store_keeps_options_in_the_accepting_transaction(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    accepted = await store.accept(request(tenant, options={"k": "v"}))
    assert (await store.explain(accepted.job_id))["options"] == {"k": "v"}


async def test_an_unknown_option_is_422_naming_it_and_the_supported_ones(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    unknown = {"ocr_languages": "deu", "threshold": 0.1, "model": "big"}
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        as_json = await client.post(JOBS, json=submission(options=unknown), headers=tk.headers)
        as_file = await client.post(
            JOBS,
            files={"document": ("a.txt", b"INVOICE 1 total 10.00 EUR", "text/plain")},
            data={"metadata": json.dumps({"options": unknown})},
            headers=tk.headers,
        )
        after = await count_rows(pool, *WRITTEN_TABLES)
        known = await client.post(
            JOBS, json=submission(options={"ocr_languages": "deu"}), headers=tk.headers
        )
    supported = ", ".join(SUPPORTED_OPTIONS)
    for r in (as_json, as_file):
        body = assert_problem(r, 422, "unknown_option")
        assert body["detail"] == (
            f"unknown option(s) 'model', 'threshold'; supported options: {supported}"
        )
        assert [e["loc"] for e in body["errors"]] == [
            ["body", "options", "model"],
            ["body", "options", "threshold"],
        ]
    assert after == before
    assert known.status_code == 202, known.text
