"""Grounding a corrected row (issue 18): the nearest printed row that shows every
corrected value, a stacked row as one, a tax line by its rate, base and amount."""

from __future__ import annotations

from decimal import Decimal

from pipeline.extraction import ground_row_correction, row_field
from pipeline.invoice import Evidence, LineItem, TaxLine

TEXT = (
    "INVOICE 42\n"
    "Pos  Description        Qty   Price    Amount  VAT\n"
    "1    Steel bracket        4   12,50     50,00  19 %\n"
    "2    Copper wire          2    7,25     14,50  19 %\n"
    "3    Service call\n"
    "                          1   80,00     80,00  19 %\n"
    "Net 144,50\n"
    "VAT 19 % on 144,50        27,46\n"
)


def _span(ev: Evidence) -> str:
    return TEXT[ev.start : ev.end]


def _item(description: str, qty: str, price: str, amount: str, rate: str = "19") -> LineItem:
    nowhere = Evidence(page=1, start=0, end=7, quote="INVOICE")
    return LineItem(
        description=description,
        quantity=Decimal(qty),
        unit_price=Decimal(price),
        line_amount=Decimal(amount),
        tax_rate=Decimal(rate),
        evidence=nowhere,
    )


def test_a_corrected_item_moves_to_the_row_that_prints_it() -> None:
    old = Evidence(
        page=1, start=TEXT.index("1    Steel"), end=TEXT.index("1    Steel") + 10, quote=""
    )
    ev = ground_row_correction(TEXT, _item("Copper wire", "2", "7.25", "14.50"), old)
    assert ev is not None and _span(ev) == "2    Copper wire          2    7,25     14,50  19 %"
    assert ev.quote == _span(ev) and ev.line == 4


def test_a_stacked_row_is_one_row_and_a_wrong_number_grounds_nowhere() -> None:
    ev = ground_row_correction(TEXT, _item("Service call", "1", "80.00", "80.00"), None)
    assert ev is not None and _span(ev).startswith("3    Service call\n")
    assert _span(ev).endswith("80,00  19 %")
    assert ground_row_correction(TEXT, _item("Steel bracket", "4", "12.50", "51.00"), None) is None
    # The description must be on the row, and a printed rate must be the item's.
    assert ground_row_correction(TEXT, _item("Copper wire", "4", "12.50", "50.00"), None) is None
    assert (
        ground_row_correction(TEXT, _item("Steel bracket", "4", "12.50", "50.00", "7"), None)
        is None
    )


def test_a_tax_line_grounds_on_the_line_printing_rate_base_and_amount() -> None:
    tax = TaxLine(
        rate=Decimal("19"),
        base=Decimal("144.50"),
        amount=Decimal("27.46"),
        evidence=Evidence(page=1, start=0, end=7, quote="INVOICE"),
    )
    ev = ground_row_correction(TEXT, tax, None)
    assert ev is not None and _span(ev) == "VAT 19 % on 144,50        27,46"
    wrong = tax.model_copy(update={"amount": Decimal("27.50")})
    assert ground_row_correction(TEXT, wrong, None) is None


def test_row_paths() -> None:
    assert row_field("line_items[2].quantity") == ("line_items", 2, "quantity")
    assert row_field("tax_lines[0].amount") == ("tax_lines", 0, "amount")
    assert row_field("tax_lines[0].quantity") is None
    assert row_field("line_items[0].evidence") is None
    assert row_field("gross_total") is None
