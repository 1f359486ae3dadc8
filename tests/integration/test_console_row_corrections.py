"""Corrections of line items and tax lines through the console over real HTTP and
PostgreSQL (issue 18): a misread row is fixed in the review form, grounded again on
its printed row, validated again, audited before/after in ``review_corrections`` and
shown by ``fenceline explain``; a row value printed nowhere keeps the job in review."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.jobs import JobStore, render_explain
from tests.support.api import loopback_server, settings_for, tenant_with_key
from tests.support.console import (
    console_login,
    correction_form,
    invoice_awaiting_review,
    job_page,
    job_row,
    review_inputs,
)
from tests.support.delivery import registry_for

pytestmark = pytest.mark.integration


def _misread_line_amount(result: dict[str, Any]) -> None:
    item = result["line_items"][0]
    item["line_amount"] = str(Decimal(item["line_amount"]) + 10)


def _misread_tax_amount(result: dict[str, Any]) -> None:
    tax = result["tax_lines"][0]
    tax["amount"] = str(Decimal(tax["amount"]) + 1)


def _row_form(csrf: str, version: int, action: str, **values: str) -> dict[str, Any]:
    return correction_form(csrf, version, action, **values)


async def test_a_misread_line_item_is_corrected_regrounded_and_approved(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    await registry_for(pool).register(tk.tenant.id, "http://127.0.0.1:9/erp")
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, misread=_misread_line_amount)
        before = await job_row(pool, job.job_id)
        right = str(job.invoice.truth.line_items[0].line_amount)
        await console_login(c, tk)
        html, csrf = await job_page(c, job.job_id)
        # The whole form posts back, unchanged fields included: only the row changes.
        fields = dict(
            (name, value)
            for name, value in review_inputs(html)
            if name.startswith("value.") and not name.startswith("value.line_items[0].line_")
        )
        r = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **_row_form(csrf, job.state_version, "approve"),
                **fields,
                "value.line_items[0].line_amount": right,
            },
        )
        after = await job_row(pool, job.job_id)
        explained = render_explain(await JobStore(pool).explain(job.job_id))
        async with pool.acquire() as conn:
            audit = await conn.fetchrow(
                "SELECT changes, reasons_before, reasons_after FROM review_corrections"
                " WHERE job_id = $1",
                job.job_id,
            )
            deliveries = await conn.fetchval(
                "SELECT count(*) FROM deliveries WHERE job_id = $1", job.job_id
            )
    wrong = before["result"]["line_items"][0]["line_amount"]
    codes = {(x["code"], x["field"]) for x in before["validation"]["reasons"]}
    assert ("line_amount_mismatch", "line_items[0].line_amount") in codes, codes
    assert 'name="value.line_items[0].line_amount"' in html and f'value="{wrong}"' in html
    assert r.status_code == 303, r.text
    assert after["state"] == "SUCCEEDED", after["validation"]["reasons"]
    item = after["result"]["line_items"][0]
    assert Decimal(item["line_amount"]) == Decimal(right)
    assert item["evidence"] == before["result"]["line_items"][0]["evidence"]  # same row
    assert audit["changes"] == [
        {"field": "line_items[0].line_amount", "before": wrong, "after": right, "grounded": True}
    ]
    assert audit["reasons_after"] == [] and audit["reasons_before"]
    assert deliveries == 1
    assert f"line_items[0].line_amount: {wrong!r} -> {right!r}\n" in explained


async def test_a_tax_line_corrected_to_a_value_printed_nowhere_stays_in_review(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, misread=_misread_tax_amount)
        before = await job_row(pool, job.job_id)
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        bad = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=_row_form(csrf, job.state_version, "approve", **{"tax_lines[0].rate": "x%"}),
        )
        missing = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=_row_form(csrf, job.state_version, "save", **{"tax_lines[9].amount": "1.00"}),
        )
        r = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=_row_form(csrf, job.state_version, "save", **{"tax_lines[0].amount": "12345.67"}),
        )
        after = await job_row(pool, job.job_id)
        html, csrf = await job_page(c, job.job_id)
        right = str(job.invoice.truth.tax_lines[0].amount)
        fixed = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=_row_form(
                csrf, after["state_version"], "approve", **{"tax_lines[0].amount": right}
            ),
        )
        final = await job_row(pool, job.job_id)
        explained = render_explain(await JobStore(pool).explain(job.job_id))
    assert bad.status_code == missing.status_code == 422
    assert r.status_code == 303
    assert after["state"] == "REVIEW_REQUIRED"
    assert after["state_version"] == job.state_version + 1
    assert after["result"]["tax_lines"][0]["amount"] == "12345.67"
    # Printed nowhere: the old span stays, and the row is named ungrounded.
    assert (
        after["result"]["tax_lines"][0]["evidence"] == before["result"]["tax_lines"][0]["evidence"]
    )
    codes = {(x["code"], x["field"]) for x in after["validation"]["reasons"]}
    assert ("ungrounded_value", "tax_lines[0]") in codes, codes
    assert ("evidence_value_mismatch", "tax_lines[0]") in codes, codes
    assert "the corrected row is printed on no row" in html
    assert fixed.status_code == 303 and final["state"] == "SUCCEEDED", final["validation"]
    assert "tax_lines[0].amount: " in explained
    assert "-> '12345.67'  (not printed in the document)" in explained
