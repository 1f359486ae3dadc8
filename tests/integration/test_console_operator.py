"""The operator experience over real HTTP and PostgreSQL (issue 45, defect 7), without
a browser: an approval with reasons left is refused with the reasons and writes
nothing; every dashboard count links to the rows behind it with the next step; the
dashboard's fragment is what the page polls; a job's timeline opens from any job and
reads as a table with headers, relative times (the exact second in a tooltip) and the
acting key's name, never its id. Browser checks: ``tests/browser/test_console_operator_browser.py``.
"""

from __future__ import annotations

import re
import uuid

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.jobs import JobStore
from pipeline.messaging.dlq import archive_outbox_event
from pipeline.settings import Settings
from pipeline.tenants import Tenant
from tests.support.api import add_key, loopback_server, settings_for, tenant_with_key
from tests.support.console import (
    console_login,
    correction_form,
    form_token,
    invoice_awaiting_review,
    job_page,
    job_row,
)
from tests.support.delivery import registry_for
from tests.support.jobs import accept_many

pytestmark = pytest.mark.integration

#: Every table an approval could write to.
REVIEW_TABLES = (
    "review_corrections",
    "review_decisions",
    "job_events",
    "outbox_events",
    "deliveries",
)


async def _counts(pool: asyncpg.Pool, job_id: uuid.UUID) -> dict[str, int]:
    async with pool.acquire() as conn:
        return {
            t: int(await conn.fetchval(f"SELECT count(*) FROM {t} WHERE job_id = $1", job_id))
            for t in REVIEW_TABLES
        }


async def test_approve_with_reasons_left_is_refused_with_the_reasons_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    await registry_for(pool).register(tk.tenant.id, "http://127.0.0.1:9/erp")
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        before, counts_before = await job_row(pool, job.job_id), await _counts(pool, job.job_id)
        # Unchanged values, nothing overridden: the gross total mismatch remains.
        untouched = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, "approve"),
        )
        # A value printed nowhere, with a note: still reasons, still refused.
        typed = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, job.state_version, "approve", gross_total="99999.99"),
                "note": "my note",
            },
        )
        after, counts_after = await job_row(pool, job.job_id), await _counts(pool, job.job_id)
    assert untouched.status_code == typed.status_code == 422
    assert "Saved" not in untouched.text and 'class="flash"' not in untouched.text
    refusal = untouched.text.split('id="approve-refused"')[1].split("</div>")[0]
    assert "nothing was saved" in refusal
    assert "gross_total_mismatch" in refusal and "@ gross_total" in refusal
    # What the reviewer typed stays in the form, though nothing was stored.
    assert 'value="99999.99"' in typed.text and ">my note</textarea>" in typed.text
    kept = typed.text.split('id="approve-refused"')[1].split("</div>")[0]
    assert "ungrounded_value" in kept
    assert counts_after == counts_before
    assert counts_before["review_corrections"] == 0
    assert after == before


async def _failed_job(pool: asyncpg.Pool, tenant: Tenant) -> uuid.UUID:
    """One of the tenant's jobs, failed terminally by a driver, with a dead letter."""
    store = JobStore(pool, Settings())
    [job_id] = await accept_many(store, tenant, 1)
    leases = await store.claim("console-operator-test", limit=50)
    lease = next(x for x in leases if x.job_id == job_id)
    await store.fail(lease, error_class="rate_limited", reason="attempts_exhausted")
    async with pool.acquire() as conn:
        await archive_outbox_event(
            conn,
            event_id=uuid.uuid4(),
            job_id=job_id,
            event_type="extraction.dead_lettered.v1",
            payload={"reason": "attempts_exhausted", "error_class": "rate_limited"},
            body=b"{}",
        )
    return job_id


def _links(html: str) -> set[str]:
    return {h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', html)}


async def test_every_dashboard_count_opens_the_rows_behind_it_with_the_next_step(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    other = await tenant_with_key(pool, scopes=("jobs", "operator"))
    endpoint = await registry_for(pool).register(tk.tenant.id, "http://127.0.0.1:9/erp")
    foreign = await registry_for(pool).register(other.tenant.id, "http://127.0.0.1:9/other")
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        waiting = await invoice_awaiting_review(pool, c, tk)
        failed = await _failed_job(pool, tk.tenant)
        await console_login(c, tk)
        page = await c.get("/console/dashboard")
        body = await c.get("/console/dashboard/body")
        failed_list = await c.get("/console/jobs?state=FAILED_TERMINAL")
        review_list = await c.get("/console/jobs?state=REVIEW_REQUIRED")
        letters = await c.get("/console/dead-letters")
        endpoint_page = await c.get(f"/console/endpoints/{endpoint.endpoint.id}")
        other_endpoint = await c.get(f"/console/endpoints/{foreign.endpoint.id}")
        no_state = await c.get("/console/jobs?state=NOPE")
        # The re-drive the FAILED_TERMINAL list offers, audited under the signed-in key.
        redrive = await c.post(
            f"/console/jobs/{failed}/redrive",
            data={"csrf_token": form_token(failed_list.text), "reason": "provider is back"},
        )
        redrive_without_csrf = await c.post(
            f"/console/jobs/{failed}/redrive", data={"reason": "again"}
        )
        async with pool.acquire() as conn:
            state = await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", failed)
            who = await conn.fetchval(
                "SELECT requested_by FROM job_redrives WHERE job_id = $1", failed
            )
        timeline = await c.get(f"/console/jobs/{failed}/timeline")
    assert page.status_code == body.status_code == 200, page.text
    # The page polls its fragment (no inline script) and the fragment is the same view.
    assert 'data-refresh-url="/console/dashboard/body"' in page.text
    assert "<script>" not in page.text and "<html" not in body.text
    assert 'id="jobs-by-state"' in body.text and 'id="endpoints"' in body.text
    links = _links(page.text)
    assert {
        "/console/jobs?state=REVIEW_REQUIRED",
        "/console/jobs?state=FAILED_TERMINAL",
        "/console/queue",
        "/console/dead-letters",
        f"/console/endpoints/{endpoint.endpoint.id}",
    } <= links, links
    # The next step for each actionable count.
    failed_row = re.search(r'<tr data-state="FAILED_TERMINAL">(.*?)</tr>', page.text, re.S)
    assert failed_row and ">1</a>" in failed_row[1] and ">re-drive</a>" in failed_row[1]
    review_row = re.search(r'<tr data-state="REVIEW_REQUIRED">(.*?)</tr>', page.text, re.S)
    assert review_row and 'href="/console/queue" class="action">review</a>' in review_row[1]
    # Behind the counts: the jobs, each with its page and timeline, the re-drive form.
    assert str(failed) in failed_list.text and str(waiting.job_id) not in failed_list.text
    assert f'action="/console/jobs/{failed}/redrive"' in failed_list.text
    assert f'href="/console/jobs/{failed}/timeline"' in failed_list.text
    assert str(waiting.job_id) in review_list.text
    assert letters.status_code == 200 and f"/console/jobs/{failed}/timeline" in letters.text
    assert "attempts_exhausted" in letters.text
    assert endpoint_page.status_code == 200 and "http://127.0.0.1:9/erp" in endpoint_page.text
    assert "Breaker" in endpoint_page.text
    assert other_endpoint.status_code == 404 and "127.0.0.1:9/other" not in other_endpoint.text
    assert no_state.status_code == 400
    assert redrive.status_code == 303 and "flash=redriven" in redrive.headers["location"]
    assert redrive_without_csrf.status_code == 403
    assert state == "READY" and who == f"key:{tk.key_id}"
    redrives = timeline.text.split('id="timeline-redrives"')[1].split("</table>")[0]
    assert "provider is back" in redrives
    assert f"key {tk.key[:8]}" in redrives and str(tk.key_id) not in timeline.text


async def test_the_timeline_opens_from_any_job_and_reads_with_headers_times_and_names(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    operator = await add_key(pool, tk, ("operator",))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        approved = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, job.state_version, "approve"),
                "override": ["gross_total_mismatch|gross_total"],
                "note": "supplier confirmed by phone",
            },
        )
        as_operator = {"Authorization": f"Bearer {operator.key}"}
        # A SUCCEEDED job's own page (not a review page any more) links its timeline.
        page = await c.get(f"/console/jobs/{job.job_id}", headers=as_operator)
        listed = await c.get("/console/jobs?state=SUCCEEDED", headers=as_operator)
        timeline = await c.get(f"/console/jobs/{job.job_id}/timeline", headers=as_operator)
    assert approved.status_code == 303
    link = f'href="/console/jobs/{job.job_id}/timeline"'
    assert link in page.text and link in listed.text
    html = timeline.text
    assert timeline.status_code == 200
    for section in ("events", "attempts", "admission", "outbox", "deliveries", "review"):
        table = html.split(f'id="timeline-{section}"')[1].split("</table>")[0]
        assert "<thead><tr><th>" in table, section
    events = html.split('id="timeline-events"')[1].split("</table>")[0]
    assert "<th>When</th>" in events and "REVIEW_REQUIRED → SUCCEEDED" in events
    # Relative times, the exact second (no microseconds) in the tooltip.
    times = re.findall(r'<time datetime="[^"]+" title="([^"]+)">([^<]+)</time>', html)
    assert times, html[:2000]
    for title, text in times:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", title), title
        assert text == "just now" or text.endswith(" ago"), text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{3,6}", html)
    # The reviewer by the key's name (its printed prefix), never its id.
    review = html.split('id="timeline-review"')[1].split("</table>")[0]
    assert f"key {tk.key[:8]}" in review and "supplier confirmed by phone" in review
    assert str(tk.key_id) not in html
