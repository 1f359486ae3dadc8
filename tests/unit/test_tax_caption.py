"""A tax breakdown whose rows stand under a caption naming their category (issue 41).

Breakdowns often group their rows under a caption printed on a line of its own, left of
the numbers ("Standard rate" over "Goods   137,50   25   34,38"). The caption heads no
column, so a rate printed without its "%" is still read by the column header above it;
a header that names no rate over the number still proves nothing. Pages written here.
"""

from __future__ import annotations

from decimal import Decimal

from tests.unit.test_role_proofs import PRICE_FIRST, _doc, _run

BREAKDOWN = (
    "Category            Base       Rate [%]     Tax\n"
    "\n"
    "Standard rate\n"
    "Goods             137,50             25   34,38\n"
)


def _taxes(doc: str) -> list[int]:
    return [n for n, text in enumerate(doc.split("\n"), 1) if text.startswith("Goods")]


def test_a_caption_over_a_tax_row_does_not_hide_the_rate_header() -> None:
    doc = _doc(PRICE_FIRST).replace("VAT 25 % on 137,50: 34,38\n", BREAKDOWN)
    out = _run(doc, taxes=_taxes(doc))
    assert [(t.rate, t.base, t.amount) for t in out.extraction.tax_lines] == [
        (Decimal(25), Decimal("137.50"), Decimal("34.38"))
    ]


def test_a_header_that_names_no_rate_proves_no_rate_past_a_caption() -> None:
    doc = _doc(PRICE_FIRST).replace(
        "VAT 25 % on 137,50: 34,38\n", BREAKDOWN.replace("Rate [%]", "Code    ")
    )
    out = _run(doc, taxes=_taxes(doc))
    assert out.extraction.tax_lines == ()
    assert any(r.field.startswith("tax_lines") for r in out.report.reasons)


#: The symtrax rendering of the FeRD samples (``pdftotext -layout``): the header's cells
#: left-aligned, the row's numbers right-aligned, so the bare rate "25" stands under no
#: header cell at all, between "Base" and "Tax".
OFFSET_BREAKDOWN = (
    "Category Goods Base             Rate %          Tax amount\n"
    "Standard rate\n"
    "                       137,50              25     34,38\n"
)


def _offset_taxes(doc: str) -> list[int]:
    return [n for n, text in enumerate(doc.split("\n"), 1) if "137,50" in text and "25" in text]


def test_a_rate_between_two_header_cells_is_read_by_the_cells_order() -> None:
    doc = _doc(PRICE_FIRST).replace("VAT 25 % on 137,50: 34,38\n", OFFSET_BREAKDOWN)
    taxes = [n for n in _offset_taxes(doc) if "Net" not in doc.split("\n")[n - 1]]
    out = _run(doc, taxes=taxes)
    assert [(t.rate, t.base, t.amount) for t in out.extraction.tax_lines] == [
        (Decimal(25), Decimal("137.50"), Decimal("34.38"))
    ]


def test_a_row_with_more_numbers_than_header_cells_reads_no_rate() -> None:
    doc = _doc(PRICE_FIRST).replace(
        "VAT 25 % on 137,50: 34,38\n",
        OFFSET_BREAKDOWN.replace("Rate %          Tax amount", "Rate %").replace(
            "25     34,38", "25     34,38     1"
        ),
    )
    taxes = [n for n in _offset_taxes(doc) if "Net" not in doc.split("\n")[n - 1]]
    out = _run(doc, taxes=taxes)
    assert out.extraction.tax_lines == ()
