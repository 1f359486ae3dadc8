"""The ``eval --dataset`` format takes contract v3's values, and scores them (issue 44).

A truth line may state a supplier's tax number without a VAT id, document and line
allowances and charges, a line's price basis, the payable amounts, a tax currency, a
payment means, a credit note and its preceding invoice. Each is scored like any other
field: a SUCCEEDED invoice whose v3 value differs from the truth is a false accept.

The e-invoice is KoSIT's 01.17a (tests/data/einvoices/payable, see its NOTICE): gross
336.9, rounding 0.01, amount due 336.91.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.eval.dataset import load_dataset, parse_line
from benchmarks.eval.scoring import extraction_values, judge, truth_values
from benchmarks.eval.truth import truth_from_extraction
from pipeline.invoice import SCHEMA_V3, Extraction
from pipeline.validation import Decision
from tests.support.einvoices import decide_xml

PAYABLE = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "payable"
ROUNDED_UBL = PAYABLE / "01.17a-INVOICE_ubl.xml"
CREDIT = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "einvoices"
    / "credit_notes"
    / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
)

V3_LINE = {
    "id": "v3-0001",
    "ocr_text": "Lieferant GmbH\nSteuernummer 201/113/40209\n...",
    "truth": {
        "supplier": {"name": "Lieferant GmbH", "vat_id": None, "tax_number": "201/113/40209"},
        "invoice_number": "R-17",
        "issue_date": "2024-05-03",
        "due_date": None,
        "currency": "EUR",
        "iban": None,
        "net_total": "190.00",
        "tax_total": "0.00",
        "gross_total": "190.00",
        "line_items": [
            {
                "description": "Schrauben",
                "quantity": "200",
                "unit_price": "50.00",
                "line_amount": "90.00",
                "tax_rate": "0",
                "price_basis_quantity": "100",
                "allowances_charges": [{"kind": "allowance", "amount": "10.00"}],
            },
            {
                "description": "Montage",
                "quantity": "1",
                "unit_price": "100.00",
                "line_amount": "100.00",
                "tax_rate": "0",
            },
        ],
        "tax_lines": [{"rate": "0", "base": "190.00", "amount": "0.00"}],
        "allowances_charges": [{"kind": "charge", "amount": "0.00", "tax_rate": "0"}],
        "document_type": "credit_note",
        "preceding_invoice": {"number": "R-16", "issue_date": "2024-04-01"},
        "prepaid_amount": "50.00",
        "rounding_amount": "0.00",
        "amount_due": "140.00",
        "tax_currency": "SEK",
        "tax_total_in_tax_currency": "0.00",
        "payment_means": "59",
        "mandate_reference": "M-29901-1",
        "debited_account": "DE02120300000000202051",
        "payee_account": "SE:BANKGIRO:50501055",
    },
    "expected_decision": "REVIEW_REQUIRED",
}


def test_the_loader_accepts_a_line_stating_contract_v3_values(tmp_path: Path) -> None:
    path = tmp_path / "v3.jsonl"
    path.write_text(json.dumps(V3_LINE) + "\n")
    dataset = load_dataset(path)
    assert dataset.skipped == []
    [case] = dataset.cases
    t = case.record.truth
    assert (t.supplier.vat_id, t.supplier.tax_number) == (None, "201/113/40209")
    assert (t.prepaid_amount, t.amount_due) == (Decimal("50.00"), Decimal("140.00"))
    assert t.line_items[0].price_basis_quantity == Decimal("100")
    assert [(a.kind, a.amount) for a in t.line_items[0].allowances_charges] == [
        ("allowance", Decimal("10.00"))
    ]
    assert t.line_items[1].allowances_charges == ()
    assert (t.document_type, t.tax_currency, t.payment_means) == ("credit_note", "SEK", "59")
    assert (t.mandate_reference, t.debited_account) == ("M-29901-1", "DE02120300000000202051")
    assert t.payee_account == "SE:BANKGIRO:50501055"
    assert t.preceding_invoice is not None and t.preceding_invoice.number == "R-16"
    # Written back as read; a v3 key the line did not state stays out.
    written = case.record.to_json()["truth"]
    assert written == V3_LINE["truth"]
    assert "price_basis_quantity" not in written["line_items"][1]


@pytest.mark.parametrize(
    ("where", "bad", "message"),
    [
        ("amount_due", 140.0, "decimal string"),
        ("allowances_charges", [{"kind": "discount", "amount": "1", "tax_rate": "0"}], "kind"),
        ("amount_paid", "1.00", "unknown key 'truth.amount_paid'"),
    ],
)
def test_a_wrong_v3_value_is_refused_with_its_place(where: str, bad: object, message: str) -> None:
    line = json.loads(json.dumps(V3_LINE))
    line["truth"][where] = bad
    with pytest.raises(ValueError, match=message):
        parse_line(json.dumps(line))


def test_a_plain_line_still_reads_without_v3_keys() -> None:
    line = json.loads(json.dumps(V3_LINE))
    for key in Extraction.v3_fields:  # every header value contract v3 adds
        del line["truth"][key]
    record, _ = parse_line(json.dumps(line))
    assert record.truth.amount_due is None and record.truth.document_type == "invoice"


def test_a_succeeded_invoice_with_a_wrong_amount_due_is_a_false_accept() -> None:
    decision, reasons, e = decide_xml(ROUNDED_UBL.read_bytes())
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.amount_due is not None and e.amount_due.value == Decimal("336.91")
    truth = truth_from_extraction(e)
    right = judge(
        "SUCCEEDED",
        extraction_values(e),
        truth_values(truth, schema_version=SCHEMA_V3),
        "SUCCEEDED",
    )
    assert (right["exact_match"], right["false_accept"]) == (True, False)
    assert right["fields"]["amount_due"] == [1, 1, 1]
    # The truth says 336.90 is due: the extraction's 336.91 is wrong, so accepting it is
    # a false accept, though every v2 field equals the truth.
    wrong_truth = truth.model_copy(update={"amount_due": Decimal("336.90")})
    wrong = judge(
        "SUCCEEDED",
        extraction_values(e),
        truth_values(wrong_truth, schema_version=SCHEMA_V3),
        "SUCCEEDED",
    )
    assert wrong["differing_fields"] == ["amount_due"]
    assert (wrong["exact_match"], wrong["acceptable"], wrong["false_accept"]) == (
        False,
        False,
        True,
    )
    assert wrong["fields"]["amount_due"] == [0, 1, 1]
    # A truth stating the amount due where the extraction holds none (a model's answer,
    # which has no place for it): the field is missed, and accepting it is wrong too.
    no_due = e.model_copy(update={"amount_due": None, "rounding_amount": None})
    missed = judge(
        "SUCCEEDED",
        extraction_values(no_due),
        truth_values(truth, schema_version=SCHEMA_V3),
        "SUCCEEDED",
    )
    assert missed["false_accept"] and "amount_due" in missed["differing_fields"]


def test_line_entries_and_price_bases_are_scored() -> None:
    _, _, e = decide_xml(CREDIT.read_bytes())
    truth = truth_from_extraction(e)
    assert judge(
        "SUCCEEDED", extraction_values(e), truth_values(truth, schema_version=SCHEMA_V3), None
    )["exact_match"]
    first = truth.line_items[0]
    changed = truth.model_copy(
        update={
            "line_items": (
                first.model_copy(update={"price_basis_quantity": Decimal("1")}),
                *truth.line_items[1:],
            ),
            "document_type": "invoice",
        }
    )
    verdict = judge(
        "SUCCEEDED", extraction_values(e), truth_values(changed, schema_version=SCHEMA_V3), None
    )
    assert verdict["false_accept"]
    assert verdict["differing_fields"] == ["document_type", "line_items[].price_basis_quantity"]


def test_an_amount_due_equal_to_the_gross_is_no_value_of_its_own() -> None:
    """Contract v3 states the payable amounts only where the gross is not what is due;
    a truth that writes the gross as the amount due says the same."""
    _, _, e = decide_xml(ROUNDED_UBL.read_bytes())
    plain = e.model_copy(update={"amount_due": None, "rounding_amount": None})
    truth = truth_from_extraction(plain)
    assert truth.amount_due is None
    stated = truth.model_copy(update={"amount_due": truth.gross_total})
    verdict = judge(
        "SUCCEEDED",
        extraction_values(plain),
        truth_values(stated, schema_version=SCHEMA_V3),
        "SUCCEEDED",
    )
    assert verdict["exact_match"] and not verdict["false_accept"]
