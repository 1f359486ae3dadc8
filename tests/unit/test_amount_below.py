"""A row whose first line adds up only without cents ("1  Abrechnungskreis 1  15.387,08
1  19 %" reads as 1 x 1 = 1) while its amount with cents is printed on the line below
(the FeRD "Betriebskostenabrechnung" sample, under a GTIN) is read with that amount."""

from __future__ import annotations

from decimal import Decimal

from pipeline.extraction.layout import Layout
from pipeline.extraction.rows import read_row
from pipeline.extraction.table import table_rows

PAGE = """\
Handelsrechnung (380) Nr. 471102 vom 05.03.2018

    Pos                Beschreibung              Nettopreis      Menge   Steuersatz    Nettobetrag
    1                  Abrechnungskreis 1         15.387,08          1         19 %
                       4012345001235                                                     15.387,08

                       Rechnungssumme ohne USt.                                          15.387,08
"""


def test_the_amount_with_cents_below_is_the_rows() -> None:
    doc = Layout.read(PAGE)
    row = read_row(doc, 4)
    assert row is not None
    read = row.read
    assert read.line_amount.value == Decimal("15387.08")
    assert doc.line_at(row.first.page, row.key[1]).number == 5
    assert {read.quantity.value, read.unit_price.value} == {Decimal("1"), Decimal("15387.08")}


def test_the_table_is_whole_with_that_row() -> None:
    rows = table_rows(Layout.read(PAGE))
    assert rows is not None and [row.line for row in rows] == [4]


def test_a_row_without_cents_anywhere_still_reads_on_its_line() -> None:
    doc = Layout.read("Widgets   2   3   6\nNext line 7\n")
    row = read_row(doc, 1)
    assert (
        row is not None
        and row.read.line_amount.value == Decimal("6")
        and row.end == doc.line(1).end
    )
