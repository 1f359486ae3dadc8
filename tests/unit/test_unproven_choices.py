"""An answer whose choice the page does not prove goes to review, never to SUCCEEDED.

The layout fuzzer's decoys on fresh seeds (50000-51999) found two: a due date left out
where the page prints one in a payment sentence whose words no due label lists (Danish
"Venligst betal senest 25.08.2023"), and a company-register number ("Org.nr 55621674")
taken as the invoice number because "rg.nr" inside "Org.nr" read as the abbreviated
invoice label "Rg.-Nr.". These documents are written by hand after them.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from pipeline.extraction.answer import Answer, ItemRef
from pipeline.invoice import ReasonCode, SupplierRecord, TenantMasterData
from pipeline.worker import interpret

MASTER = TenantMasterData(
    (SupplierRecord("Fjord Parts AS", "NO923456783", frozenset({"NO9386011117947"})),),
    frozenset({"NOK", "EUR"}),
)
TODAY = date(2026, 3, 20)


def _doc(*, number: str = "Invoice no.: FP-2026-117\n", extra: str = "") -> str:
    return (
        "Fjord Parts AS\nStorgata 5, 0155 Oslo\nVAT: NO923456783\n\n"
        f"{number}Invoice date: 03.03.2026\n\n"
        "Description            Qty     Unit price     Amount    VAT\n"
        "Bolt M8                  3          12,50      37,50    25 %\n"
        "Gasket                   4          25,00     100,00    25 %\n\n"
        "Net total: 137,50\nVAT 25 % on 137,50: 34,38\nTotal due: 171,88 EUR\n"
        f"IBAN: NO93 8601 1117 947\n{extra}"
    )


def _run(doc: str, **changes: object):  # type: ignore[no-untyped-def]
    lines = doc.split("\n")
    items = [
        ItemRef(line=n, description=d)
        for d in ("Bolt M8", "Gasket")
        for n, text in enumerate(lines, 1)
        if text.startswith(d)
    ]
    answer: dict[str, object] = {
        "supplier": "Fjord Parts AS",
        "vat_id": "NO923456783",
        "number": "FP-2026-117",
        "issue_date": "03.03.2026",
        "due_date": None,
        "currency": "EUR",
        "iban": "NO93 8601 1117 947",
        "net": "137,50",
        "tax": "34,38",
        "gross": "171,88",
        "items": items,
        "taxes": [n for n, text in enumerate(lines, 1) if text.startswith("VAT 25 %")],
    }
    answer.update(changes)
    text = json.dumps(Answer.model_validate(answer).model_dump(mode="json", exclude_none=False))
    return interpret(text, doc, MASTER, today=TODAY)


def _rules(out, field: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {r.rule for r in out.report.reasons if r.field == field}


@pytest.mark.parametrize(
    "sentence",
    [
        "Venligst betal senest 02.04.2026.\n",  # Danish: "please pay at the latest"
        "Bitte begleichen Sie den Betrag, Zahlung spätestens 02.04.2026.\n",
    ],
)
def test_a_due_date_left_out_of_a_payment_sentence_goes_to_review(sentence: str) -> None:
    out = _run(_doc(extra=sentence), due_date=None)
    assert out.extraction.due_date is None
    assert any(
        r.code is ReasonCode.MISSING_FIELD and r.field == "due_date" for r in out.report.reasons
    )
    assert _rules(out, "due_date") & {
        "label.due_date.left_out",
        "label.due_date.payment_sentence",
    }


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "Delivery date: 05.03.2026\n",
        "Thank you for your order of 01.03.2026.\n",
        "Payment by bank transfer.\n",
    ],
)
def test_no_due_date_is_accepted_where_no_date_is_a_due_date(extra: str) -> None:
    out = _run(_doc(extra=extra), due_date=None)
    assert out.report.reasons == (), extra


def test_a_company_register_number_is_no_abbreviated_invoice_label() -> None:
    doc = _doc(number="Fakt.nr        FP-2026-117\n", extra="\nOrg.nr 55621674\n")
    assert _run(doc).report.reasons == ()
    out = _run(doc, number="55621674")
    assert out.extraction.invoice_number is None
    assert "label.invoice_number.no_label" in _rules(out, "invoice_number")


def test_two_numbers_that_labels_prove_are_both_refused() -> None:
    doc = _doc(number="Fakt.nr        FP-2026-117\n", extra="\nRech.-Nr. 55621674\n")
    for number in ("FP-2026-117", "55621674"):
        out = _run(doc, number=number)
        assert out.extraction.invoice_number is None, number
        assert "label.invoice_number.rival" in _rules(out, "invoice_number"), number
