"""One text-safety rule at write time for the human-readable fields Fenceline stores
(issue 45, defect 4): endpoint descriptions, disable reasons, review notes,
re-drive reasons, dead-letter replay notes and console corrections refuse bidi and
control characters (a newline or tab only where the text spans lines, a note) with
a 422 ``unsafe_text`` problem (the CLI: an error line), and write nothing. Displays
escape such characters; the ERP that receives a corrected value may not. The OpenAPI
document gives each of these fields the rule as a ``pattern``
(so schema-valid text is not refused), and the CLI's writers keep the same rule."""

from __future__ import annotations

import json
import uuid

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from tests.integration.test_api_endpoints import BASE, dev_settings, operator, register
from tests.integration.test_cli import fenceline
from tests.support.api import asgi_client, assert_problem, loopback_server, tenant_with_key
from tests.support.console import (
    console_login,
    correction_form,
    invoice_awaiting_review,
    job_page,
)
from tests.support.delivery import fetchval

pytestmark = pytest.mark.integration

RLO = "Paid \u202egnp.exe"  # shows as "Paid exe.png"
ESC = "Paid \x1b[2K\rRefunded"  # a terminal erases the line and writes over it


async def _rows(pool: asyncpg.Pool, table: str) -> int:
    return int(await fetchval(pool, f"SELECT count(*) FROM {table}"))


@pytest.mark.parametrize("text", [RLO, ESC, "two\nlines"])
async def test_an_endpoint_description_with_hidden_characters_is_refused(
    pool: asyncpg.Pool, dsn: str, text: str
) -> None:
    tk = await operator(pool)
    before = await _rows(pool, "webhook_endpoints")
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        r = await client.post(
            BASE, json={"url": "http://127.0.0.1:9/hook", "description": text}, headers=tk.headers
        )
    detail = assert_problem(r, 422, "unsafe_text")["detail"]
    assert "description" in detail and "U+" in detail and text not in detail
    assert await _rows(pool, "webhook_endpoints") == before


@pytest.mark.parametrize("text", [RLO, ESC])
async def test_a_disable_reason_with_hidden_characters_is_refused(
    pool: asyncpg.Pool, dsn: str, text: str
) -> None:
    tk = await operator(pool)
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        endpoint_id = (await register(client, tk, description="ERP, Jörg's team"))["endpoint"]["id"]
        r = await client.post(
            f"{BASE}/{endpoint_id}/disable", json={"reason": text}, headers=tk.headers
        )
        after = await client.get(f"{BASE}/{endpoint_id}", headers=tk.headers)
    assert "reason" in assert_problem(r, 422, "unsafe_text")["detail"]
    assert after.json()["state"] == "active" and after.json()["disabled_reason"] is None


async def test_a_review_note_with_hidden_characters_is_refused_and_lines_are_kept(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        job = await invoice_awaiting_review(pool, client, tk)
        url = f"/v1/extraction-jobs/{job.job_id}/review"
        body = {"decision": "reject", "state_version": job.state_version}
        refused = [
            await client.post(url, json={**body, "note": text}, headers=tk.headers)
            for text in (RLO, ESC)
        ]
        before = await _rows(pool, "review_decisions")
        multiline = await client.post(
            url, json={**body, "note": "wrong supplier\n\tsee ticket 42"}, headers=tk.headers
        )
    for r in refused:
        assert "note" in assert_problem(r, 422, "unsafe_text")["detail"]
    assert multiline.status_code == 200, multiline.text
    assert await _rows(pool, "review_decisions") == before + 1


async def test_a_console_correction_with_hidden_characters_is_refused_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(dev_settings(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        before = await _rows(pool, "review_corrections")
        value = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, **{"supplier.name": RLO}),
        )
        note = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={**correction_form(csrf, job.state_version), "note": ESC},
        )
        after = await _rows(pool, "review_corrections")
        # A browser sends a textarea's lines as CRLF: a multi-line note is kept, as LF.
        lines = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, job.state_version, gross_total=job.right_gross),
                "note": "checked\r\nwith the supplier",
            },
        )
        note_kept = await fetchval(
            pool, "SELECT note FROM review_corrections WHERE job_id = $1", job.job_id
        )
    for r in (value, note):
        assert r.status_code == 422 and "U+" in r.text, r.text
    assert after == before
    assert lines.status_code == 303 and note_kept == "checked\nwith the supplier"


async def test_the_cli_endpoint_writers_refuse_hidden_characters_too(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    url = "https://93.184.216.34/hooks/a"  # a global literal: no DNS, allowed by default
    cli = ("endpoints", "register", "--tenant", tk.tenant.name, "--url", url)
    described = fenceline(*cli, "--description", RLO, dsn=dsn)
    registered = fenceline(*cli, dsn=dsn)
    endpoint = json.loads(registered.stdout)["endpoint_id"]
    disabled = fenceline(
        "endpoints", "disable", "--tenant", tk.tenant.name, "--endpoint", endpoint,
        "--reason", ESC, dsn=dsn,
    )  # fmt: skip
    assert described.returncode == 1 and "--description" in described.stderr
    assert "U+202E" in described.stderr
    assert disabled.returncode == 1 and "U+001B" in disabled.stderr
    state = await fetchval(pool, "SELECT state FROM webhook_endpoints WHERE id = $1", endpoint)
    count = await fetchval(
        pool, "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", tk.tenant.id
    )
    assert (state, count) == ("active", 1)


@pytest.mark.parametrize("text", [RLO, ESC])
async def test_a_redrive_reason_with_hidden_characters_is_refused(
    pool: asyncpg.Pool, dsn: str, text: str
) -> None:
    tk = await operator(pool)
    before = await _rows(pool, "job_redrives")
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        one = await client.post(
            f"/v1/extraction-jobs/{uuid.uuid4()}/redrive",
            json={"reason": text},
            headers=tk.headers,
        )
        selection = await client.post("/v1/redrives", json={"reason": text}, headers=tk.headers)
    for r in (one, selection):
        assert "reason" in assert_problem(r, 422, "unsafe_text")["detail"]
    assert await _rows(pool, "job_redrives") == before


async def test_the_cli_redrive_refuses_a_hidden_character_in_its_audit_text(dsn: str) -> None:
    cli = ("redrive", "--tenant", "nobody", "--job", str(uuid.uuid4()))
    reason = fenceline(*cli, "--by", "ops", "--reason", RLO, dsn=dsn)
    by = fenceline(*cli, "--by", "ops\x1b[2K", "--reason", "supplier fixed", dsn=dsn)
    assert reason.returncode == 1 and "--reason" in reason.stderr and "U+202E" in reason.stderr
    assert by.returncode == 1 and "--by" in by.stderr and "U+001B" in by.stderr


async def test_the_cli_dlq_replay_refuses_a_hidden_character_in_its_audit_text(dsn: str) -> None:
    letter = str(uuid.uuid4())
    note = fenceline("dlq", "replay", letter, "--by", "ops", "--note", RLO, dsn=dsn)
    by = fenceline("dlq", "replay", letter, "--by", "ops\u2066", dsn=dsn)
    lines = fenceline("dlq", "replay", letter, "--by", "ops", "--note", "a\n\tb", dsn=dsn)
    assert note.returncode == 1 and "--note" in note.stderr and "U+202E" in note.stderr
    assert by.returncode == 1 and "--by" in by.stderr and "U+2066" in by.stderr
    # A note may span lines: it passes the rule and meets the missing dead letter.
    assert lines.returncode == 1 and "U+" not in lines.stderr, lines.stderr
