"""A tax breakdown line is no item row: "380,00  0  0,00" reads as base x 0 % = 0,00
and as 380 x 0 = 0,00 (the FeRD "Physiotherapeut" samples). Counted as a row beside
the items, it kept the table from proving whole, the grammar asked a free list, and
the adapter wrote one of the two items."""

from __future__ import annotations

from pipeline.extraction.answer import ItemRef, schema_for, table_items
from pipeline.extraction.layout import Layout
from pipeline.extraction.table import printed_table, table_rows

PAGE = """\
Handelsrechnung Nr. R18-31 vom 03.10.2018

Pos               Beschreibung     Nettopreis          Menge        Steuer   Entgelt
 0               Physiotherapie         26,00         10 Stk   0 % VAT (E)   260,00

 1                  Hausbesuch        12,00          10 Stk    0 % VAT (E)   120,00

Umsatzsteueraufschlüsselung:
 Art (Kategorie) Warenwert Zu-/Abschlag Steuerbasisbetrag    USt. %          USt.-Betrag
VAT (E)
Steuerfreie
                                                   380,00                0           0,00
Leistungen nach

Belegsummen:
                                          Positionssumme                           380,00
                                          Steuerbetrag                               0,00
                                          Bruttosumme                              380,00
"""


def test_a_tax_breakdown_line_is_no_row_of_the_table() -> None:
    doc = Layout.read(PAGE)
    assert [row.read.line_amount.text for row in printed_table(doc)] == ["260,00", "120,00"]


def test_the_items_beside_a_breakdown_are_code_s_to_fill_in() -> None:
    doc = Layout.read(PAGE)
    rows = table_rows(doc)
    assert rows is not None
    assert [(row.line, row.cells) for row in rows] == [
        (4, ("Physiotherapie",)),
        (6, ("Hausbesuch",)),
    ]
    # each row prints one description: the grammar asks none, code fills both in
    assert "items" not in schema_for(doc)["properties"]
    assert table_items(None, rows) == (ItemRef(4, "Physiotherapie"), ItemRef(6, "Hausbesuch"))
