"""Which reasons a correction resolves (pipeline/api/correction_reasons.py, docs/console.md
"What a correction resolves"): validation's are recomputed, a value's reading goes with a
correction of that value, and what the document states stays until overridden."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.api.correction_reasons import (
    RECOMPUTED_RULE_PREFIX,
    VALUE_RULE_PREFIXES,
    kept_reasons,
    merged,
)
from pipeline.invoice import RULES


def _reason(code: str, field: str, rule: str | None) -> dict[str, Any]:
    out = {"code": code, "field": field, "detail": "d"}
    if rule is not None:
        out["rule"] = rule
    return out


def _kept(reasons: list[dict[str, Any]], *changed: str) -> list[tuple[str, str]]:
    return [(r["code"], r["field"]) for r in kept_reasons(reasons, changed)]


@pytest.mark.parametrize(
    "reason",
    [
        _reason("payee_account_not_iban", "iban", "einvoice.payee_account_not_iban"),
        _reason("einvoice_not_holdable", "document", "einvoice.not_holdable"),
        _reason("einvoice_not_holdable", "supplier.vat_id", "einvoice.not_holdable"),
        _reason("einvoice_invalid", "schema", "einvoice.schema"),
        _reason("einvoice_invalid", "rules", "einvoice.rules"),
        _reason("xml_text_mismatch", "gross_total", "einvoice.xml_text_mismatch"),
        _reason("amount_due_differs", "gross_total", "totals.amount_due_differs"),
        _reason("ocr_unverified", "document", "documents.ocr_unverified"),
        _reason("contract_v3_required", "amount_due", "validation.contract_v3_required"),
        _reason(
            "credit_note_reference_unknown", "preceding_invoice", "credit_notes.reference_unknown"
        ),
        # the job store's, with no rule id
        _reason("duplicate_invoice", "invoice_number", None),
        _reason("possible_duplicate", "invoice_number", None),
        _reason("possible_amendment", "invoice_number", None),
        # a rule this module does not know stays (never dropped unseen)
        _reason("something_new", "gross_total", "future.rule"),
    ],
    ids=lambda r: f"{r['code']}@{r['field']}",
)
def test_what_the_document_states_stays_even_where_its_field_is_corrected(
    reason: dict[str, Any],
) -> None:
    field = reason["field"]
    assert _kept([reason]) == [(reason["code"], field)]
    assert _kept([reason], "due_date") == [(reason["code"], field)]
    assert _kept([reason], field, f"{field}.x") == [(reason["code"], field)]


@pytest.mark.parametrize(
    "reason",
    [
        _reason("gross_total_mismatch", "gross_total", "validation.gross_total_mismatch"),
        _reason("iban_not_registered", "iban", "validation.iban_not_registered"),
        _reason("payee_account_not_iban", "iban", "validation.payee_account_not_iban"),
        _reason("supplier_unknown", "supplier.name", "validation.supplier_unknown"),
        # stored before rules had ids: validation's
        _reason("gross_total_mismatch", "gross_total", None),
    ],
    ids=lambda r: f"{r['code']}@{r.get('rule')}",
)
def test_validations_reasons_are_left_to_the_new_report(reason: dict[str, Any]) -> None:
    assert _kept([reason]) == []
    assert _kept([reason], "due_date") == []


@pytest.mark.parametrize(
    "reason",
    [
        _reason("ungrounded_value", "gross_total", "grounding.not_printed"),
        _reason("ungrounded_value", "gross_total", "correction.not_printed"),
        _reason("ambiguous_role", "invoice_number", "label.invoice_number.rival"),
        _reason("ocr_unverified", "supplier.name", "documents.ocr_unverified"),
        _reason("ungrounded_value", "gross_total", None),
    ],
    ids=lambda r: f"{r['code']}@{r.get('rule')}",
)
def test_a_values_reading_goes_only_with_a_correction_of_that_value(
    reason: dict[str, Any],
) -> None:
    field = reason["field"]
    assert _kept([reason], "due_date", "iban") == [(reason["code"], field)]
    assert _kept([reason], field) == []


def test_a_rows_reason_goes_with_a_correction_of_any_of_its_values() -> None:
    row = _reason("ungrounded_value", "line_items[2]", "correction.row_not_printed")
    value = _reason("ambiguous_role", "line_items[2].quantity", "roles.symmetric_factors")
    reasons = [row, value]
    assert _kept(reasons, "line_items[2].unit_price") == [
        ("ambiguous_role", "line_items[2].quantity")
    ]
    assert _kept(reasons, "line_items[2].quantity") == []
    assert _kept(reasons, "line_items[20].quantity") == [
        ("ungrounded_value", "line_items[2]"),
        ("ambiguous_role", "line_items[2].quantity"),
    ]
    listed = _reason("missing_field", "line_items", "items.none_listed")
    assert _kept([listed], "line_items[0].quantity") == [("missing_field", "line_items")]


def test_kept_reasons_keep_their_order_and_shape_and_merge_once() -> None:
    reader = _reason("payee_account_not_iban", "iban", "einvoice.payee_account_not_iban")
    validation = _reason("payee_account_not_iban", "iban", "validation.payee_account_not_iban")
    mismatch = _reason("gross_total_mismatch", "gross_total", "validation.gross_total_mismatch")
    kept = kept_reasons([mismatch, reader], ["due_date"])
    assert kept == [reader] and kept[0] is not reader
    assert merged(kept, [dict(reader), validation, mismatch]) == [reader, validation, mismatch]


def test_every_value_rule_prefix_names_registered_rules() -> None:
    """A prefix that matched no registered rule id would sort nothing, silently."""
    for prefix in (*VALUE_RULE_PREFIXES, RECOMPUTED_RULE_PREFIX):
        assert any(rule.startswith(prefix) for rule in RULES), prefix
