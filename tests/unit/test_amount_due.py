"""A page stating an amount to pay other than the gross total goes to review.

The FeRD/symtrax "Betriebskostenabrechnung" pages print a gross of 18.310,63, then
"Erhaltene Anzahlungen -17808,00" and "Zahlbetrag 502,63"; a perfect transcription of
the gross was accepted, and an ERP told to pay it would have paid the advance again.
"""

from __future__ import annotations

from decimal import Decimal

from benchmarks.invoices.generator import Variant, generate_invoice
from pipeline.extraction import answer_for
from pipeline.extraction.amount_due import amount_due_reasons
from pipeline.extraction.answer import parse_answer
from pipeline.extraction.grounding import ground
from pipeline.extraction.layout import Layout
from pipeline.invoice import ReasonCode

TOTALS = """\
Rechnungssumme ohne USt.                                          15.387,08
Steuerbetrag                                                       2.923,55
Bruttosumme                                                       18.310,63
"""
GROSS = Decimal("18310.63")


def _codes(text: str, gross: Decimal | None = GROSS) -> list[str]:
    return [r.code.value for r in amount_due_reasons(Layout.read(text), gross)]


def test_an_advance_received_and_the_rest_to_pay_are_named() -> None:
    page = TOTALS + "Erhaltene Anzahlungen      -17808,00\nZahlbetrag      502,63\n"
    reasons = amount_due_reasons(Layout.read(page), GROSS)
    assert [(r.code, r.field, r.rule) for r in reasons] == [
        (ReasonCode.AMOUNT_DUE_DIFFERS, "gross_total", "totals.amount_due_differs")
    ]
    assert "17808,00" in reasons[0].detail and "line 4" in reasons[0].detail


def test_an_amount_to_pay_alone_that_is_not_the_gross_is_named() -> None:
    assert _codes(TOTALS + "Amount due: 502.63\n".replace(".", ",")) == ["amount_due_differs"]
    assert _codes(TOTALS + "Reste à payer      1.000,00\n") == ["amount_due_differs"]


def test_what_agrees_with_the_gross_changes_nothing() -> None:
    assert _codes(TOTALS + "Zahlbetrag      18.310,63\n") == []
    assert _codes(TOTALS + "Net à payer  18.310,63 EUR\n") == []
    assert _codes(TOTALS + "Erhaltene Anzahlungen      0,00\n") == []  # nothing paid before
    assert _codes(TOTALS + "Te betalen voor 15-01-2026\n") == []  # a due date's label
    assert _codes(TOTALS + "Skonto 2 %\n") == []
    # An amount to pay above the gross: the answer's gross is wrong (the arithmetic says
    # so), no advance was paid.
    assert _codes(TOTALS + "Zahlbetrag      18.310,63\n", Decimal("15387.08")) == []


def test_a_perfect_answer_on_a_page_with_an_advance_goes_to_review() -> None:
    inv = generate_invoice(2026, Variant.CLEAN, max_line_items=3)
    clean = ground(parse_answer(answer_for(inv.truth, inv.ocr_text)), inv.ocr_text)
    assert not [r for r in clean.reasons if r.code is ReasonCode.AMOUNT_DUE_DIFFERS]
    assert inv.truth.gross_total is not None
    paid = (inv.truth.gross_total.value / 2).quantize(Decimal("0.01"))
    mark = Layout.read(inv.ocr_text).mark
    text = inv.ocr_text + f"\nAdvance payment received: {str(paid).replace('.', mark)}\n"
    got = ground(parse_answer(answer_for(inv.truth, text)), text)
    assert [r.rule for r in got.reasons if r.code is ReasonCode.AMOUNT_DUE_DIFFERS] == [
        "totals.amount_due_differs"
    ]
