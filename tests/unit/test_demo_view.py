"""The demo's per-invoice table and summary, from fixed job rows (no Ray, no engine)."""

from __future__ import annotations

import json
import unicodedata
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks.demo.erp import ErpPostings, JobPosting, join_postings
from benchmarks.demo.rows import (
    COMPARED_FIELDS,
    InvoiceRow,
    build_row,
    differing_fields,
    summarise_rows,
)
from benchmarks.demo.view import COLUMNS, format_summary, format_table, join_fit, plot_invoices
from benchmarks.invoices.generator import generate_invoice

TRUTH = generate_invoice(2026).truth.model_dump(mode="json")
NAME = TRUTH["supplier"]["name"]["value"]
NUMBER = TRUTH["invoice_number"]["value"]
GROSS = TRUTH["gross_total"]["value"]
CUR = TRUTH["currency"]["value"]


def submitted(n: int, variant: str = "clean", expected: str = "SUCCEEDED") -> dict[str, Any]:
    return {
        "job_id": f"{n:08x}-0000-4000-8000-000000000000",
        "tenant": "acme-gmbh",
        "seed": 2026,
        "variant": variant,
        "expected": expected,
    }


def with_gross(result: dict[str, Any], value: str) -> dict[str, Any]:
    changed: dict[str, Any] = json.loads(json.dumps(result))
    changed["gross_total"]["value"] = value
    return changed


def fixed_rows() -> list[InvoiceRow]:
    jobs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        # right, accepted, posted once
        (
            submitted(1),
            {
                "state": "SUCCEEDED",
                "attempt": 1,
                "result": TRUTH,
                "validation": {"reasons": []},
                "erp_applications": 1,
                "erp_posted": True,
                "delivery_states": "delivered",
                "completion_tokens": 812,
            },
        ),
        # off by a cent, caught by validation
        (
            submitted(2, "arithmetic_off_by_cent", "REVIEW_REQUIRED"),
            {
                "state": "REVIEW_REQUIRED",
                "attempt": 1,
                "result": with_gross(TRUTH, str(Decimal(GROSS) + Decimal("0.01"))),
                "validation": {"reasons": [{"code": "gross_total_mismatch", "field": "x"}]},
                "terminal_reason": "gross_total_mismatch",
            },
        ),
        # the model's answer never closed: nothing extracted
        (
            submitted(3),
            {
                "state": "FAILED_TERMINAL",
                "attempt": 1,
                "result": None,
                "terminal_reason": "attempts_exhausted",
                "last_error_class": "malformed_output",
                "last_error": "answer still open at the 1100-token cap",
            },
        ),
        # malformed output sent to review: raw text, nothing extracted
        (
            submitted(4),
            {
                "state": "REVIEW_REQUIRED",
                "result": {"raw_output": '{"supplier": {'},
                "validation": {"reasons": [{"code": "malformed_output"}], "schema_valid": False},
            },
        ),
        # accepted although it should have gone to review, and reached the ERP twice
        (
            submitted(5, "homoglyph_supplier", "REVIEW_REQUIRED"),
            {
                "state": "SUCCEEDED",
                "result": with_gross(TRUTH, str(Decimal(GROSS) - Decimal("0.67"))),
                "validation": {"reasons": []},
                "erp_applications": 2,
                "erp_posted": True,
            },
        ),
    ]
    return [build_row(i, s, j, TRUTH) for i, (s, j) in enumerate(jobs, start=1)]


def test_rows_carry_extracted_values_decisions_and_erp_postings() -> None:
    ok, cent, failed, malformed, double = fixed_rows()
    assert (ok.supplier, ok.invoice_number, ok.gross_total, ok.currency) == (
        NAME,
        NUMBER,
        GROSS,
        CUR,
    )
    assert ok.matches_truth is True and ok.erp == "posted once" and ok.posted_exactly_once
    assert not ok.false_accept and ok.reasons == ()
    assert cent.differing_fields == ("gross_total",) and cent.matches_truth is False
    assert cent.reasons == ("gross_total_mismatch",) and cent.erp == "not posted"
    assert failed.matches_truth is None and failed.supplier is None
    assert failed.reasons == ("attempts_exhausted", "malformed_output")
    assert failed.error_detail == "answer still open at the 1100-token cap"
    assert malformed.matches_truth is None and malformed.reasons == ("malformed_output",)
    assert double.erp == "posted 2x" and not double.posted_exactly_once and double.false_accept


def test_table_has_one_line_per_invoice_with_expected_next_to_decision() -> None:
    rows = fixed_rows()
    lines = format_table(rows)
    assert len(lines) == 2 + len(rows)
    header = lines[0]
    assert header.index("expected") < header.index("decision") < header.index("supplier")
    ok, cent, failed, malformed, double = lines[2:]
    for needle in ("2026 clean", "SUCCEEDED", NAME[:12], NUMBER, f"{GROSS} {CUR}"):
        assert needle in ok
    assert ok.endswith("✓") and "posted once" in ok
    assert "REVIEW_REQUIRED  REVIEW_REQUIRED" in cent
    assert "gross_total_mismatch" in cent and cent.endswith("✗ gross_total")
    assert "SUCCEEDED        FAILED_TERMINAL" in failed
    assert "attempts_exhausted, malformed_output" in failed
    assert failed.endswith("– nothing extracted") and "—" in failed
    assert malformed.endswith("– nothing extracted")
    assert "posted 2x" in double and "homoglyph_supplier" in double
    # The table lines up: every line's "decision" cell starts under the header's.
    col = header.index("decision")
    assert ok[col:].startswith("SUCCEEDED") and failed[col:].startswith("FAILED_TERMINAL")


def test_long_cells_are_clipped_not_shifting_the_columns() -> None:
    [row] = fixed_rows()[:1]
    long = build_row(
        9,
        submitted(9),
        {"state": "SUCCEEDED", "result": {**TRUTH, "supplier": {"name": "X" * 80}}},
        TRUTH,
    )
    a, b = format_table([row, long])[2:]
    width = dict(COLUMNS)["supplier"]
    assert "X" * (width - 1) + "…" in b and "X" * width not in b
    assert a.index(NUMBER) == b.index(NUMBER)


def test_summary_counts_and_line() -> None:
    summary = summarise_rows(fixed_rows(), 412.4)
    assert summary == {
        "invoices": 5,
        "succeeded": 2,
        "review_required": 2,
        "failed": 1,
        "unsettled": 0,
        "posted_exactly_once": 1,
        "posted_more_than_once": 1,
        "false_accepts": 1,
        "decisions_as_expected": 2,
        "extracted_equal_to_truth": 1,
        "wall_seconds": 412.4,
    }
    assert format_summary(summary) == (
        "2 SUCCEEDED, 2 REVIEW_REQUIRED, 1 FAILED | 1 posted to the ERP exactly once"
        " (1 MORE THAN ONCE) | false accepts 1 | decisions as expected 2/5"
        " | extracted = truth 1/5 | wall time 412 s"
    )


def test_rows_serialise_for_demo_json() -> None:
    entries = json.loads(json.dumps([r.as_dict() for r in fixed_rows()]))
    first = entries[0]
    for key in ("seed", "variant", "supplier", "invoice_number", "gross", "decision", "reasons"):
        assert key in first
    assert first["gross"] == f"{GROSS} {CUR}" and first["erp_posting"] == "posted once"
    assert first["matches_truth"] is True and first["differing_fields"] == []
    assert entries[1]["differing_fields"] == ["gross_total"]
    assert entries[2]["matches_truth"] is None


def test_truth_comparison_folds_unicode_form_and_number_spelling() -> None:
    same = json.loads(json.dumps(TRUTH))
    same["supplier"]["name"]["value"] = unicodedata.normalize("NFD", "Müller & Söhne AG")
    truth = json.loads(json.dumps(TRUTH))
    truth["supplier"]["name"]["value"] = "Müller  & Söhne AG"
    same["line_items"][0]["quantity"] = f"{Decimal(same['line_items'][0]['quantity']):.4f}"
    assert differing_fields(same, truth) == ()
    plain = {**same, "invoice_number": NUMBER, "gross_total": GROSS}  # no evidence
    assert differing_fields(plain, truth) == ()
    homoglyph = json.loads(json.dumps(truth))
    homoglyph["supplier"]["name"]["value"] = "Мüller & Söhne AG"  # Cyrillic М
    assert differing_fields(homoglyph, truth) == ("supplier.name",)
    fewer = {**truth, "line_items": truth["line_items"][:1]}
    assert differing_fields(fewer, truth) == ("line_items",)


def test_png_shows_the_table(tmp_path: Path) -> None:
    rows = fixed_rows()
    path = plot_invoices(rows, summarise_rows(rows, 1.0), tmp_path / "demo.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_many_reasons_and_fields_are_counted_not_cut_mid_word() -> None:
    assert join_fit(["aaaa", "bbbb", "cccc"], 40) == "aaaa, bbbb, cccc"
    assert join_fit(["aaaa", "bbbb", "cccc"], 14) == "aaaa +2 more"
    assert join_fit(["a" * 50], 10) == "a" * 50  # the first item always shows
    assert join_fit([], 10) == ""
    garbage = {
        "supplier": {"name": "1.234,50,", "vat_id": None},
        "invoice_number": "1.234,50,",
        "currency": "CUR",
        "gross_total": "1.234",
        "line_items": [],
        "tax_lines": [],
    }
    reasons = [{"code": c} for c in ("line_amount_mismatch", "tax_line_mismatch", "iban_x")]
    row = build_row(
        2,
        submitted(2),
        {"state": "REVIEW_REQUIRED", "result": garbage, "validation": {"reasons": reasons}},
        TRUTH,
    )
    assert len(row.differing_fields) == len(COMPARED_FIELDS) == 12
    line = format_table([row])[2]
    assert "line_amount_mismatch +2 more" in line
    assert line.endswith("✗ 12/12: supplier.name, supplier.vat_id +10 more")


def test_the_table_says_which_invoices_were_sent_as_files() -> None:
    job = {"state": "REVIEW_REQUIRED", "result": TRUTH, "validation": {"reasons": []}}
    scan = build_row(4, {**submitted(4, "arithmetic_off_by_cent"), "document": "scan"}, job, TRUTH)
    pdf = build_row(5, {**submitted(5), "document": "pdf"}, job, TRUTH)
    text = build_row(6, submitted(6), job, TRUTH)  # no "document": pasted text
    header, _, *lines = format_table([scan, pdf, text])
    col = header.index("sent as")
    assert [line[col:].split()[0] for line in lines] == ["scan", "PDF", "text"]
    assert scan.as_dict()["document"] == "scan" and text.document == "text"


def test_postings_from_the_erp_database_join_the_job_rows_by_id() -> None:
    posted, twice, never = (uuid.UUID(submitted(n)["job_id"]) for n in (1, 2, 3))
    rows: dict[uuid.UUID, dict[str, Any]] = {
        i: {"id": i, "state": "SUCCEEDED", "result": TRUTH} for i in (posted, twice, never)
    }
    other = uuid.uuid4()  # a posting of a job this database does not hold changes no row
    postings = ErpPostings(
        postings=3,
        duplicates_absorbed=1,
        by_job={
            posted: JobPosting(1, True),
            twice: JobPosting(2, True),
            other: JobPosting(1, True),
        },
    )
    join_postings(rows, postings)
    built = {i: build_row(1, {**submitted(1), "job_id": str(i)}, rows[i], TRUTH) for i in rows}
    assert built[posted].erp == "posted once" and built[posted].posted_exactly_once
    assert built[twice].erp == "posted 2x" and not built[twice].posted_exactly_once
    assert built[never].erp == "not posted"
    assert (rows[never]["erp_applications"], rows[never]["erp_posted"]) == (0, False)
    assert other not in rows
