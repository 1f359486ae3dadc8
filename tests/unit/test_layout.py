"""The layout stage: pages, lines and tokens with offsets, the decimal mark decided once
for the whole document, each line's numbers read once and shared by every stage."""

from __future__ import annotations

from decimal import Decimal

import pytest

from benchmarks.invoices import generate_invoice
from pipeline.extraction import layout as layout_module
from pipeline.extraction import prepare_call
from pipeline.extraction.extractor import answer_for
from pipeline.extraction.layout import Layout, Token, layout_of, per_layout
from pipeline.worker import interpret

TEXT = "Rechnung 2024/17\nBetrag  1.234,56 EUR\f  Seite 2\n19 % MwSt  234,56\n"


def test_lines_are_numbered_across_pages_with_offsets_in_their_page() -> None:
    doc = Layout.read(TEXT)
    assert doc.pages == ("Rechnung 2024/17\nBetrag  1.234,56 EUR", "  Seite 2\n19 % MwSt  234,56\n")
    assert [(line.number, line.page, line.start, line.end) for line in doc.lines] == [
        (1, 1, 0, 16),
        (2, 1, 17, 37),
        (3, 2, 0, 9),
        (4, 2, 10, 27),
        (5, 2, 28, 28),  # the empty line after the last newline
    ]
    for line in doc.lines:
        assert doc.pages[line.page - 1][line.start : line.end] == line.text
    assert doc.line(3) is doc.lines[2] and doc.line(0) is None and doc.line(6) is None
    assert doc.line_at(2, 12).number == 4
    assert doc.tokens(doc.lines[2]) == [Token(2, 7, "Seite"), Token(8, 9, "2")]


def test_the_decimal_mark_is_the_documents_not_the_lines() -> None:
    """ "1,500" alone reads as one thousand five hundred; in a document whose amounts put
    a comma before their cents it is one and a half, on every line."""
    german = Layout.read("Menge 1,500 kg\nSumme 12,50\nMwSt 2,38\n")
    english = Layout.read("Qty 1,500 kg\nTotal 12.50\nTax 2.38\n")
    assert (german.mark, english.mark) == (",", ".")
    assert [p.value for p in german.numbers_on(german.lines[0])] == [Decimal("1.500")]
    assert [p.value for p in english.numbers_on(english.lines[0])] == [Decimal("1500")]
    grouped = Layout.read("Total  1 234,56\nNet 1 037,44\n")
    assert grouped.space and [p.text for p in grouped.numbers_on(grouped.lines[0])] == ["1 234,56"]


def test_a_shown_part_keeps_the_documents_marks() -> None:
    """The prompt's part of a document (rows code reads left empty) reads its numbers as
    the whole document does, even where the lines left hold no amount in cents."""
    doc = Layout.read("Menge 1,500\nSumme 12,50\n")
    shown = doc.blanked(frozenset({2}))
    assert shown.text == "Menge 1,500\n\n"  # line 2 kept, empty: numbering holds
    assert (shown.mark, shown.space) == (",", False)
    assert [p.value for p in shown.numbers_on(shown.lines[0])] == [Decimal("1.500")]
    assert doc.blanked(frozenset()) is doc


def test_numbers_are_read_once_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = layout_module.numbers_in

    def counting(text: str, mark: str, *, space_groups: bool = False) -> list:  # type: ignore[type-arg]
        calls.append(text)
        return real(text, mark, space_groups=space_groups)

    monkeypatch.setattr(layout_module, "numbers_in", counting)
    doc = Layout.read(TEXT)
    assert calls == [line.text for line in doc.lines]
    first = doc.numbers_on(doc.lines[1])
    assert [p.text for p in first] == ["1.234,56"] and doc.numbers_on(doc.lines[1]) == first
    assert len(calls) == len(doc.lines)


def test_one_mark_decision_per_document_for_a_whole_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """prepare_call, answer_for and interpret of one text share one layout: the decimal
    mark is decided once for all of them, and the outcome is the usual one."""
    inv = generate_invoice(3, max_line_items=6)
    text = inv.ocr_text + "\n"  # a text no earlier test has laid out
    decided: list[str] = []
    real = layout_module.decimal_mark
    monkeypatch.setattr(layout_module, "decimal_mark", lambda t: decided.append(t) or real(t))
    prepare_call(text)
    out = interpret(answer_for(inv.truth, text), text, inv.master_data, today=inv.today)
    assert out.report.decision.value == "SUCCEEDED", out.report.reasons
    # the layout and the part the prompt shows (which keeps the document's marks)
    assert decided == [text]
    assert layout_of(text) is layout_of(text)


def test_derived_readings_live_with_their_layout() -> None:
    seen: list[int] = []

    @per_layout
    def line_count(doc: Layout, plus: int) -> int:
        seen.append(plus)
        return len(doc.lines) + plus

    a, b = Layout.read("x\ny\n"), Layout.read("x\ny\n")
    assert line_count(a, 1) == line_count(a, 1) == 4
    assert line_count(b, 1) == 4 and line_count(a, 2) == 5
    assert seen == [1, 1, 2]  # once per layout and argument, never across layouts
    assert a == b  # a layout compares by its text
