"""A correction keeps the e-invoice reader's reasons (docs/console.md "What a correction
resolves"): an XML job reviewed for what its document states (an account that is no
IBAN, a document type the contract cannot hold) is not approved because a reviewer
corrected another value; only an override by name, with a note, lets it through.

Uploaded through the real API, settled by a real driver from the XML (0 model calls),
corrected through the real console; and a text job stored with the reasons a reader and
OCR give, whose correction resolves OCR's reason on the corrected value only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.invoice import Reason, ReasonCode, SupplierRecord
from pipeline.jobs import JobStore, render_explain
from pipeline.tenants import permit_currencies, upsert_supplier
from tests.support.api import loopback_server, settings_for, tenant_with_key
from tests.support.console import (
    console_login,
    correction_form,
    invoice_awaiting_review,
    job_page,
    job_row,
)
from tests.support.delivery import registry_for
from tests.support.drivers import run_document_driver
from tests.support.einvoices import paid_to_national_account, self_billed, ubl_issued_yesterday

pytestmark = pytest.mark.integration

#: The reader's reason each planted XML waits with: (code, field).
CASES: dict[str, tuple[Callable[[bytes], bytes], tuple[str, str]]] = {
    "national_account": (paid_to_national_account, ("payee_account_not_iban", "iban")),
    "self_billed": (self_billed, ("einvoice_not_holdable", "document")),
}


def _keys(validation: dict[str, object]) -> set[tuple[str, str]]:
    reasons = validation["reasons"]
    assert isinstance(reasons, list)
    return {(r["code"], r["field"]) for r in reasons}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_correction_keeps_the_readers_reason_until_it_is_overridden(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path, case: str
) -> None:
    plant, reason = CASES[case]
    today = date.today()
    xml = plant(ubl_issued_yesterday(today))
    settings = settings_for(dsn, state_dir=tmp_path)
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    async with pool.acquire() as conn:
        await upsert_supplier(
            conn, tk.tenant.id, SupplierRecord("Bluem BV", "NL809163160B01", frozenset())
        )
        await permit_currencies(conn, tk.tenant.id, {"EUR"})
    # An ERP endpoint: an approval would create a delivery.
    await registry_for(pool).register(tk.tenant.id, "http://127.0.0.1:9/erp")
    app = create_app(settings, pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        r = await c.post(
            "/v1/extraction-jobs", files={"document": ("invoice.xml", xml)}, headers=tk.headers
        )
        assert r.status_code == 202, r.text
        job_id = uuid.UUID(r.json()["job_id"])
        _, calls = await run_document_driver(
            pool, settings, 1, today=datetime.combine(today, datetime.min.time(), UTC)
        )
        assert calls == 0
        waiting = await job_row(pool, job_id)
        assert waiting["state"] == "REVIEW_REQUIRED"
        assert _keys(waiting["validation"]) == {reason}
        waiting_rule = waiting["validation"]["reasons"][0]["rule"]
        assert waiting_rule.startswith("einvoice.")

        # The reviewer corrects another value (clears the due date) and approves:
        # refused, the reader's reason named, nothing stored.
        await console_login(c, tk)
        _, csrf = await job_page(c, job_id)
        approve = await c.post(
            f"/console/jobs/{job_id}/correct",
            data=correction_form(csrf, waiting["state_version"], "approve", due_date=""),
        )
        refused = await job_row(pool, job_id)
        # Saved instead: the due date corrected, the reason kept with the job.
        save = await c.post(
            f"/console/jobs/{job_id}/correct",
            data=correction_form(csrf, waiting["state_version"], "save", due_date=""),
        )
        saved = await job_row(pool, job_id)
        # Approved with the reason overridden by name, with a note.
        _, csrf = await job_page(c, job_id)
        overridden = await c.post(
            f"/console/jobs/{job_id}/correct",
            data={
                **correction_form(csrf, saved["state_version"], "approve"),
                "override": [
                    f"{code}|{field}" for code, field in sorted(_keys(saved["validation"]))
                ],
                "note": "checked with the supplier",
            },
        )
        approved = await job_row(pool, job_id)
        explained = render_explain(await JobStore(pool).explain(job_id))

    assert approve.status_code == 422, approve.text
    assert f'reason-left"><b>{reason[0]}</b> @ {reason[1]}:' in approve.text
    assert (refused["state"], refused["state_version"]) == (
        "REVIEW_REQUIRED",
        waiting["state_version"],
    )
    assert save.status_code == 303
    assert saved["state"] == "REVIEW_REQUIRED"
    assert saved["result"]["due_date"] is None
    # The reader's reason, first as when the XML was read. (A correction of an XML upload
    # validates without the document's text, which it does not find: an IBAN the XML
    # states is then iban_not_in_text too.)
    assert reason in _keys(saved["validation"])
    assert _keys(saved["validation"]) <= {reason, ("iban_not_in_text", "iban")}
    first = saved["validation"]["reasons"][0]
    assert ((first["code"], first["field"]), first["rule"]) == (reason, waiting_rule)
    assert saved["validation"]["decision"] == "REVIEW_REQUIRED"
    # No proof that the document states no account beside the reason that it states one
    # (the corrected result's validation finds none in the text it reads).
    assert "iban" not in {p["field"] for p in saved["validation"].get("proofs", [])}
    assert overridden.status_code == 303, overridden.text
    assert approved["state"] == "SUCCEEDED"
    assert reason in _keys({"reasons": approved["validation"]["overrides"]})
    assert f"overridden: {reason[0]}@{reason[1]}  note 'checked with the supplier'" in explained


async def test_a_correction_resolves_its_values_reading_never_the_page_and_xml_disagreement(
    pool: asyncpg.Pool, dsn: str
) -> None:
    # Waiting with the gross misread (validation's gross_total_mismatch) and, as the
    # reading stages would store them: the page and the XML disagree on the gross, and
    # OCR proved neither the gross nor the invoice number.
    read_with = (
        Reason(
            ReasonCode.XML_TEXT_MISMATCH,
            "gross_total",
            "the page does not print the XML's gross total",
            rule="einvoice.xml_text_mismatch",
        ),
        Reason(ReasonCode.OCR_UNVERIFIED, "gross_total", "w", rule="documents.ocr_unverified"),
        Reason(ReasonCode.OCR_UNVERIFIED, "invoice_number", "w", rule="documents.ocr_unverified"),
    )
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, read_with=read_with)
        assert ("gross_total_mismatch", "gross_total") in _keys({"reasons": job.reasons})
        await console_login(c, tk)
        _, csrf = await job_page(c, job.job_id)
        # The gross corrected to the printed right one, and approved: refused.
        approve = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data=correction_form(csrf, job.state_version, "approve", gross_total=job.right_gross),
        )
        refused = await job_row(pool, job.job_id)
        overridden = await c.post(
            f"/console/jobs/{job.job_id}/correct",
            data={
                **correction_form(csrf, job.state_version, "approve", gross_total=job.right_gross),
                "override": ["xml_text_mismatch|gross_total", "ocr_unverified|invoice_number"],
                "note": "the XML's gross is the one paid",
            },
        )
        approved = await job_row(pool, job.job_id)

    assert approve.status_code == 422, approve.text
    left = approve.text.split('class="reason-left"')
    named = {line.split("</b> @ ")[1].split(":")[0] for line in left[1:]}
    assert 'reason-left"><b>xml_text_mismatch</b> @ gross_total:' in approve.text
    assert 'reason-left"><b>ocr_unverified</b> @ invoice_number:' in approve.text
    assert 'reason-left"><b>ocr_unverified</b> @ gross_total:' not in approve.text
    assert 'reason-left"><b>gross_total_mismatch</b>' not in approve.text
    assert named == {"gross_total", "invoice_number"}
    assert refused["state"] == "REVIEW_REQUIRED"
    assert overridden.status_code == 303, overridden.text
    assert approved["state"] == "SUCCEEDED"
    assert approved["result"]["gross_total"]["value"] == job.right_gross
    assert _keys(approved["validation"]) == {
        ("xml_text_mismatch", "gross_total"),
        ("ocr_unverified", "invoice_number"),
    }
