"""Request options that do what they say (issue 46, item 5): a ``schema_version``
no contract implements is refused with 422 naming the supported ones, never
accepted (202) and served with the default; JSON and multipart alike."""

from __future__ import annotations

import json

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.invoice import SUPPORTED_SCHEMA_VERSIONS
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    count_rows,
    settings_for,
    submission,
    tenant_with_key,
)

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
        assert "supported versions: 1" in error["msg"]
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_a_supported_schema_version_is_accepted_and_recorded(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    [version] = SUPPORTED_SCHEMA_VERSIONS
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(JOBS, json=submission(schema_version=version), headers=tk.headers)
        assert r.status_code == 202, r.text
        job = await client.get(r.headers["Location"], headers=tk.headers)
    assert job.json()["schema_version"] == version
