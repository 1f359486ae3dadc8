"""A line item's description is the row's description, not another part of the row.

The grammar offers every cell of a row; grounding refuses one in another role
(:mod:`pipeline.extraction.description_role`): a cell under another column of the
table's header, one that ends on the label of one of the row's numbers, and in running
text the words between the row's price and amount or a cell ending on a connective.
"""

from __future__ import annotations

from pipeline.extraction.answer import Answer, ItemRef
from pipeline.extraction.grounding import ground
from pipeline.extraction.layout import layout_of
from pipeline.extraction.rows import description_cells
from tests.support.pages import NORDWIND_HEAD, NORDWIND_TOTALS

HEAD, TAIL = NORDWIND_HEAD, NORDWIND_TOTALS
#: The position number equals the quantity: either reads as the factor 8.
TABLE = (
    "Pos  Bezeichnung            MwSt.      Betrag     Menge   Einzelpreis\n"
    "  8  Beratungsleistung       19 %    1.000,00    8 Std.        125,00\n"
)
LABELLED = "\nBeratungsleistung: Menge 8, Preis 125,00, Betrag 1.000,00\n"
WORDED = "\n8 Std. Beratungsleistung zu je 125,00, zusammen 1.000,00\n"
MARKED = "\n8 x Beratungsleistung @ 125,00 = 1.000,00 (MwSt. 19 %)\n"


def _answer(description: str) -> Answer:
    return Answer.model_validate(
        {
            "supplier": "Nordwind Technik GmbH",
            "vat_id": "DE 123 456 789",
            "number": "RE-2024-00017",
            "issue_date": "05.03.2024",
            "due_date": "04.04.2024",
            "currency": "EUR",
            "iban": "DE89 3704 0044 0532 0130 00",
            "net": "1.000,00",
            "tax": "190,00",
            "gross": "1.190,00",
            "items": (ItemRef(line=14, description=description),),
            "taxes": (17,),
        }
    )


def _rules(rows: str, description: str) -> list[str | None]:
    return [r.rule for r in ground(_answer(description), HEAD + rows + TAIL).reasons]


def _item(rows: str, description: str) -> str:
    (item,) = ground(_answer(description), HEAD + rows + TAIL).extraction.line_items
    return item.description


def test_the_true_descriptions_still_ground() -> None:
    for rows in (TABLE, WORDED, MARKED):
        assert _rules(rows, "Beratungsleistung") == [], rows
        assert _item(rows, "Beratungsleistung") == "Beratungsleistung"


def test_a_quantity_with_its_unit_under_the_quantity_column_is_refused() -> None:
    """The grammar offers "8 Std." (the position 8 reads as the quantity just as well);
    it stands under "Menge", not under "Bezeichnung"."""
    assert "8 Std." in description_cells(layout_of(HEAD + TABLE + TAIL))
    assert _rules(TABLE, "8 Std.") == ["items.description_role"]


def test_a_cell_ending_on_a_numbers_label_is_refused() -> None:
    assert _rules(LABELLED, "Beratungsleistung: Menge") == ["items.description_role"]
    assert _rules(LABELLED, "Preis") == ["items.description_role"]


def test_running_texts_words_between_price_and_amount_are_refused() -> None:
    assert _rules(WORDED, "zusammen") == ["items.description_role"]


def test_a_cell_ending_on_a_connective_mark_is_no_cell() -> None:
    assert "Beratungsleistung @" not in description_cells(layout_of(HEAD + MARKED + TAIL))
    assert _rules(MARKED, "Beratungsleistung @") == ["items.not_on_row"]
