"""An API key's label names the reviewer in the console (issue 45, item 7): the
timeline and the review history showed a key's printed prefix (``key flk_AbCd…``)
because a key had no name. ``fenceline keys create --label`` gives one, ``keys list``
shows it, the console shows it where the key acted (the prefix where there is none),
and a label the text-safety rule refuses (a bidi override) is refused with no key
written. Real CLI process, real HTTP, real PostgreSQL."""

from __future__ import annotations

import json
import uuid

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.tenants import Tenant, create_api_key, create_tenant
from tests.integration.test_cli import fenceline
from tests.support.api import TenantKey, loopback_server, settings_for
from tests.support.console import invoice_awaiting_review

pytestmark = pytest.mark.integration

LABEL = "Ana Ruiz <ops>"


async def _tenant(pool: asyncpg.Pool) -> Tenant:
    async with pool.acquire() as conn:
        return await create_tenant(conn, f"labels-{uuid.uuid4().hex[:8]}")


async def test_a_labelled_key_is_listed_and_named_in_the_timeline_and_review_history(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await _tenant(pool)
    made = fenceline(
        "keys", "create", "--tenant", tenant.name, "--label", f"  {LABEL} ",
        "--scope", "jobs", "--scope", "review", "--scope", "operator", dsn=dsn,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    issued = json.loads(made.stdout)
    assert issued["label"] == LABEL  # trimmed
    listed = fenceline("keys", "list", "--tenant", tenant.name, dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    assert f'label="{LABEL}"' in listed.stdout
    async with pool.acquire() as conn:
        plain_id, plain = await create_api_key(conn, tenant.id, scopes=("jobs", "review"))
    labelled = TenantKey(tenant, issued["api_key"], uuid.UUID(issued["key_id"]))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        by_label = await invoice_awaiting_review(pool, c, labelled, seed=1)
        by_prefix = await invoice_awaiting_review(pool, c, labelled, seed=2)
        for job, key in ((by_label, labelled.key), (by_prefix, plain)):
            r = await c.post(
                f"/v1/extraction-jobs/{job.job_id}/review",
                json={"decision": "reject", "note": "checked", "state_version": job.state_version},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert r.status_code == 200, r.text
        timeline = await c.get(
            f"/console/jobs/{by_label.job_id}/timeline", headers=labelled.headers
        )
        history = await c.get(f"/console/jobs/{by_label.job_id}", headers=labelled.headers)
        other = await c.get(f"/console/jobs/{by_prefix.job_id}/timeline", headers=labelled.headers)
    escaped = "Ana Ruiz &lt;ops&gt;"
    assert timeline.status_code == 200, timeline.text
    assert f'<td class="who">{escaped}</td>' in timeline.text
    assert f"reject by {escaped}: checked" in history.text
    assert f'<td class="who">key {plain[:8]}…</td>' in other.text
    assert LABEL not in other.text and escaped not in other.text
    assert plain_id  # the unlabelled key's id is never what is shown
    assert str(plain_id) not in other.text


async def test_a_label_with_a_bidi_character_is_refused_and_no_key_is_written(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await _tenant(pool)
    refused = {
        label: fenceline("keys", "create", "--tenant", tenant.name, "--label", label, dsn=dsn)
        for label in ("Ana\u202eziuR", "   ", "x" * 101, "Ana\tRuiz")
    }
    async with pool.acquire() as conn:
        keys = await conn.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id = $1", tenant.id)
    assert keys == 0
    for label, r in refused.items():
        assert r.returncode == 2, (label, r.stdout, r.stderr)
        assert "key label" in r.stderr and r.stdout == ""
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in refused["Ana\u202eziuR"].stderr
    assert "\u202e" not in refused["Ana\u202eziuR"].stderr  # named, never echoed


async def test_the_database_refuses_an_untrimmed_or_overlong_label(pool: asyncpg.Pool) -> None:
    tenant = await _tenant(pool)
    async with pool.acquire() as conn:
        key_id, _ = await create_api_key(conn, tenant.id)
        for bad in (" padded", "", "y" * 101):
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute("UPDATE api_keys SET label = $2 WHERE id = $1", key_id, bad)
