"""Words with boxes laid out as text with its columns (issue 43): what extraction reads
from a PDF's text layer and, later, from OCR. Boxes written here, in points."""

from __future__ import annotations

from pipeline.documents.grid import Placed, layout_page

CHAR = 6.0  # one character's width
LINE = 10.0  # one line's pitch


def _word(text: str, column: int, line: int) -> Placed:
    left, top = column * CHAR, line * LINE
    return Placed(text, left, top, left + len(text) * CHAR, top + 7.0)


def _words(rows: dict[int, list[tuple[int, str]]]) -> list[Placed]:
    return [_word(text, col, line) for line, cells in rows.items() for col, text in cells]


def test_columns_keep_a_gap_of_two_spaces_or_more() -> None:
    page = layout_page(
        _words(
            {
                0: [(0, "Description"), (20, "Qty"), (26, "Price")],
                1: [(0, "Bolt"), (5, "M8"), (20, "3"), (26, "12,50")],
            }
        )
    )
    assert page.text.split("\n") == [
        "Description         Qty   Price",
        "Bolt M8             3     12,50",
    ]


def test_a_neighbouring_column_closer_than_its_place_still_gets_two_spaces() -> None:
    # "Cena" starts two characters and a bit after "Ilość" ends: a column gap
    words = [_word("Ilość", 0, 0), Placed("Cena", 5 * CHAR + 13, 0, 5 * CHAR + 13 + 24, 7)]
    assert layout_page(words).text == "Ilość  Cena"


def test_a_word_gap_after_wide_capitals_is_one_space() -> None:
    # a proportional font: "ELEKTRON" runs wider than eight median characters, and the
    # next word, 2.3 pt after it, would land two columns on by its own place
    words = [
        _word("Name:", 0, 0),
        Placed("ELEKTRON", 20 * CHAR, 0, 20 * CHAR + 8 * CHAR * 1.35, 7),
        Placed("GmbH", 20 * CHAR + 8 * CHAR * 1.35 + 2.3, 0, 20 * CHAR + 8 * CHAR * 1.35 + 26.3, 7),
    ]
    assert layout_page(words).text == "Name:               ELEKTRON GmbH"


def test_a_vertical_gap_leaves_empty_lines() -> None:
    page = layout_page(_words({0: [(0, "Invoice")], 1: [(0, "No. 7")], 4: [(0, "Total")]}))
    assert page.text.split("\n") == ["Invoice", "No. 7", "", "", "Total"]


def test_words_on_one_baseline_out_of_order_are_one_line_in_reading_order() -> None:
    words = [_word("world", 6, 0), Placed("hello", 0, 0.8, 30, 7.6)]
    assert layout_page(words).text == "hello world"


def test_every_word_keeps_its_offsets_and_its_box() -> None:
    words = _words({0: [(0, "Net"), (10, "137,50")], 2: [(3, "Gross"), (10, "171,88")]})
    page = layout_page(words)
    assert {w.text for w in page.words} == {"Net", "137,50", "Gross", "171,88"}
    for w in page.words:
        assert page.text[w.start : w.end] == w.text
        assert w.box in words


def test_an_empty_page_is_empty() -> None:
    assert layout_page([Placed("  ", 0, 0, 1, 1)]).text == ""


def test_two_spaces_in_a_monospaced_print_are_a_column_gap() -> None:
    # every word on the page has the same advance per character: a gap is its spaces
    page = layout_page(
        _words({0: [(0, "Pos"), (5, "Description")], 1: [(0, "11"), (4, "Gazole"), (11, "B7")]})
    )
    assert page.text.split("\n") == ["Pos  Description", "11  Gazole B7"]


def test_the_same_gap_on_a_proportional_page_is_one_space() -> None:
    words = _words({1: [(0, "11"), (4, "Gazole")]})
    words.append(Placed("ELEKTRON", 0, 0, 8 * CHAR * 1.35, 7))  # not the page's advance
    words.append(Placed("Industrie", 12 * CHAR, 0, 12 * CHAR + 9 * CHAR * 0.8, 7))
    assert layout_page(words).text.split("\n")[1] == "11 Gazole"
