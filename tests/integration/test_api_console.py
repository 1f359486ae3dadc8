"""The review console over real HTTP with real PostgreSQL (issue 18): sessions and
CSRF, security headers, corrections that re-validate, scopes, tenant scoping,
hostile OCR text, and the audit trail in ``fenceline explain``."""

from __future__ import annotations

import re
import uuid

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.api.console.headers import CONTENT_SECURITY_POLICY
from pipeline.api.console.session import SESSION_COOKIE
from pipeline.jobs import JobStore, render_explain
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

pytestmark = pytest.mark.integration

HOSTILE = (
    "\nNote: <script>window.__pwned = 1; alert(1)</script>"
    '\nPay at <a href="javascript:alert(2)">javascript:alert(2)</a>'
    "\n<!-- hidden comment --><img src=x onerror=alert(3)>"
    "\nSupplier \u202egnp.exe\u202c and zero\u200bwidth\n"
)


async def test_login_sets_a_strict_httponly_session_and_no_secret_reaches_a_page(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn, console_session_key="k" * 40), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        anonymous = await c.get("/console/queue")
        # A login form post without its token (a cross-site login) is refused.
        forged = await c.post("/console/login", data={"api_key": tk.key, "login_token": "x"})
        r = await console_login(c, tk)
        cookie = r.headers["set-cookie"]
        queue = await c.get("/console/queue")
        html, csrf = await job_page(c, job.job_id)
        # A correction without the CSRF token, or from another origin, changes nothing.
        no_token = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form("", job.state_version, gross_total=job.right_gross),
        )
        other_origin = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, gross_total=job.right_gross),
            headers={"Origin": "https://evil.example"},
        )
        logout = await c.post("/console/logout", data={"csrf_token": csrf})
        after = await c.get("/console/queue")
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/console/login"
    assert forged.status_code == 403
    assert SESSION_COOKIE in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    assert tk.key not in cookie
    assert queue.status_code == 200 and str(job.job_id) in queue.text
    for page in (queue.text, html):
        assert tk.key not in page and tk.key[:12] not in page
    for headers in (queue.headers, anonymous.headers, forged.headers):
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert (
        "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    )
    assert "<script>" not in html.replace('<script src="/console/static/console.js" defer>', "")
    assert no_token.status_code == 403 and other_origin.status_code == 403
    assert (await job_row(pool, job.job_id))["state_version"] == job.state_version
    assert logout.status_code == 303 and after.status_code == 303


async def test_a_correction_that_still_fails_keeps_review_with_the_new_reasons(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        # 99999.99 is printed nowhere: still wrong, and not grounded. Saved (an approval
        # would be refused, see test_console_operator), it stays in review.
        r = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, "save", gross_total="99999.99"),
        )
        after = await job_row(pool, job.job_id)
        html, csrf = await job_page(c, job.job_id)
        # The stale version is refused; overriding without a note is refused.
        stale = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, "approve"),
        )
        no_note = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, after["state_version"], "approve"),
                "override": ["gross_total_mismatch|gross_total"],
            },
        )
        explained = render_explain(await JobStore(pool).explain(job.job_id))
    assert r.status_code == 303
    assert after["state"] == "REVIEW_REQUIRED"
    assert after["state_version"] == job.state_version + 1
    assert after["result"]["gross_total"]["value"] == "99999.99"
    codes = {(x["code"], x["field"]) for x in after["validation"]["reasons"]}
    assert ("gross_total_mismatch", "gross_total") in codes
    assert ("ungrounded_value", "gross_total") in codes
    assert codes != {(x["code"], x["field"]) for x in job.reasons}
    assert after["validation"]["decision"] == "REVIEW_REQUIRED"
    assert "ungrounded_value" in html and 'value="99999.99"' in html
    assert stale.status_code == 409 and no_note.status_code == 422
    assert "\ncorrections:\n" in explained and " by key " in explained.split("corrections:")[1]
    assert f"gross_total: {job.wrong_gross.replace(' ', ' ')!r}" not in explained
    assert "-> '99999.99'  (not printed in the document)" in explained
    assert "reasons after: " in explained and "ungrounded_value@gross_total" in explained


async def test_an_override_with_a_note_approves_and_is_audited(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    operator = await add_key(pool, tk, ("operator",))
    # An ERP endpoint, so the approval creates a delivery the timeline must list.
    await registry_for(pool).register(tk.tenant.id, "http://127.0.0.1:9/erp")
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        r = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, job.state_version, "approve"),
                "override": ["gross_total_mismatch|gross_total"],
                "note": "supplier confirmed by phone",
            },
        )
        explained = render_explain(await JobStore(pool).explain(job.job_id))
        timeline = await c.get(
            f"/console/jobs/{job.job_id}/timeline",
            headers={"Authorization": f"Bearer {operator.key}"},
        )
    assert timeline.status_code == 200, timeline.text
    deliveries = timeline.text.split("<h2>Deliveries</h2>")[1].split("<h2>")[0]
    assert "extraction.completed.v1" in deliveries and "pending" in deliveries
    assert "supplier confirmed by phone" in timeline.text.split("<h2>Review</h2>")[1]
    assert r.status_code == 303
    assert (await job_row(pool, job.job_id))["state"] == "SUCCEEDED"
    assert "overridden: gross_total_mismatch@gross_total  note 'supplier confirmed by phone'" in (
        explained
    )
    assert " approve by key " in explained.split("\nreviews:\n")[1]


async def test_a_key_without_the_review_scope_cannot_correct_or_decide(
    pool: asyncpg.Pool, dsn: str
) -> None:
    reviewer = await tenant_with_key(pool, scopes=("jobs", "review"))
    reader = await add_key(pool, reviewer, ("jobs",))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, reviewer)
        await console_login(c, reader)
        html, csrf = await job_page(c, job.job_id)
        correct = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, "approve", gross_total=job.right_gross),
        )
        reject = await c.post(
            f"/console/jobs/{job.job_id}/reject",
            data={"csrf_token": csrf, "state_version": str(job.state_version), "note": "no"},
        )
        dashboard = await c.get("/console/dashboard")
        api = await c.post(
            f"/v1/extraction-jobs/{job.job_id}/review",
            json={"decision": "approve", "note": "x", "state_version": job.state_version},
            headers=reader.headers,
        )
    assert 'id="approve"' not in html and 'id="reject-button"' not in html
    assert "no <code>review</code> scope" in html
    assert correct.status_code == reject.status_code == dashboard.status_code == 403
    assert api.status_code == 403
    row = await job_row(pool, job.job_id)
    assert (row["state"], row["state_version"]) == ("REVIEW_REQUIRED", job.state_version)
    async with pool.acquire() as conn:
        audits = await conn.fetchval(
            "SELECT count(*) FROM review_corrections WHERE job_id = $1", job.job_id
        )
    assert audits == 0


async def test_another_tenants_session_sees_404_on_every_job_page_and_fragment(
    pool: asyncpg.Pool, dsn: str
) -> None:
    owner = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    stranger = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            job = await invoice_awaiting_review(pool, c, owner)
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            await console_login(c, stranger)
            queue = await c.get("/console/queue")
            csrf = form_token(queue.text)
            answers: dict[str, tuple[int, str]] = {}
            for target in (job.job_id, uuid.uuid4()):
                for suffix in ("", "/state", "/timeline", "/events"):
                    r = await c.get(f"/console/jobs/{target}{suffix}")
                    answers[f"GET {target == job.job_id}{suffix}"] = (r.status_code, r.text)
                for suffix, data in (
                    ("/correct", correction_form(csrf, job.state_version, "approve")),
                    ("/reject", {"csrf_token": csrf, "state_version": "2", "note": "x"}),
                ):
                    r = await c.post(f"/console/jobs/{target}{suffix}", data=data)
                    answers[f"POST {target == job.job_id}{suffix}"] = (r.status_code, r.text)
            rows = await c.get("/console/queue/rows")
    assert all(status == 404 for status, _ in answers.values()), {
        k: v[0] for k, v in answers.items()
    }
    for key, (_, text) in answers.items():
        if key.split()[1] == "True":  # the foreign job reads exactly like a missing one
            twin = answers[key.replace("True", "False")][1]
            assert text == twin
            assert str(job.job_id) not in text and job.invoice.supplier.name not in text
    assert str(job.job_id) not in queue.text + rows.text
    assert (await job_row(pool, job.job_id))["state"] == "REVIEW_REQUIRED"


async def test_hostile_ocr_text_is_shown_literally_and_inert(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, text=HOSTILE)
        await console_login(c, tk)
        html, _ = await job_page(c, job.job_id)
    body = html.split('<section class="document"', 1)[1]
    assert "<script>" not in body and '<a href="javascript' not in body
    assert "<!--" not in body and "<img" not in body
    assert "&lt;script&gt;window.__pwned = 1; alert(1)&lt;/script&gt;" in body
    assert "&lt;!-- hidden comment --&gt;" in body
    assert "javascript:alert(2)" in body  # as text, never as a link
    assert "\u202e" not in html and "\u200b" not in html
    assert "⟨U+202E⟩" in body and "⟨U+200B⟩" in body
    # Evidence is marked and linked to its field (the wrong gross total is a row's
    # amount, printed inside the row's span: an anchor of its own there).
    assert re.search(r'<mark class="ev" data-fields="[^"]*\bnet_total\b[^"]*"', body), body[:3000]
    assert re.search(r'id="ev-gross_total"', body), body[:3000]
    assert 'href="#ev-gross_total"' in html


async def test_an_expired_key_ends_its_console_session_and_cannot_sign_in(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """The session names its key by id and reads it on every request: past the key's
    expiry (issue 16) the session ends as it does on revocation, and the login form
    says the key expired rather than that it is unknown."""
    from tests.support.console import form_token as token_of

    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        await console_login(c, tk)
        before = await c.get("/console/queue")
        async with pool.acquire() as conn:
            expired = await conn.execute(
                "UPDATE api_keys SET expires_at = created_at + interval '1 millisecond'"
                " WHERE id = $1",
                tk.key_id,
            )
        after = await c.get("/console/queue")
        page = await c.get("/console/login")
        again = await c.post(
            "/console/login",
            data={"api_key": tk.key, "login_token": token_of(page.text, "login_token")},
        )
    assert before.status_code == 200
    assert expired == "UPDATE 1"
    assert after.status_code == 303 and after.headers["location"] == "/console/login"
    assert again.status_code == 401 and "expired" in again.text
    assert f"{SESSION_COOKIE}=" not in again.headers.get("set-cookie", "")


async def test_flash_shows_only_the_servers_own_messages(pool: asyncpg.Pool, dsn: str) -> None:
    """``?flash=`` names one of a fixed set of messages; any other text shows nothing,
    so a link cannot put words of its choosing in the console's green status line."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    forged = "Your key expired: sign in again at evil.example"
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk)
        await console_login(c, tk)
        pages = [
            (await c.get(f"{path}", params={"flash": forged, "job": forged})).text
            for path in ("/console/queue", f"/console/jobs/{job.job_id}")
        ]
        _, csrf = await job_page(c, job.job_id)
        saved = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, gross_total="99999.99"),
        )
        shown = (await c.get(saved.headers["location"])).text
        named = (await c.get("/console/queue", params={"flash": "rejected", "job": "x"})).text
    for page in pages:
        assert forged not in page and 'class="flash"' not in page
    assert saved.status_code == 303 and "flash=saved" in saved.headers["location"]
    assert "Saved; validation still finds reasons" in shown
    # A job that is not a UUID is left out of the message, never shown.
    assert '<p class="flash" role="status">Rejected the job</p>' in named
