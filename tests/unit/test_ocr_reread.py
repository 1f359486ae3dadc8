"""The second reading of uncertain OCR words: which words are read again, how they are
cut out and stacked, and when a second reading raises a confidence (no tesseract)."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from pipeline.documents.ocr_layout import PixelBox, TsvWord, parse_tsv
from pipeline.documents.ocr_reread import (
    MAX_REREAD_WORDS,
    REREAD_BELOW,
    WordStrip,
    confirm,
    uncertain,
    word_strip,
)

HEADER = (
    "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
)


def _word(text: str, confidence: float, left: int = 100, top: int = 100) -> TsvWord:
    return TsvWord(text, PixelBox(left, top, left + 20 * len(text), top + 30), confidence, 1, 1)


def _strip_tsv(*reads: tuple[int, str, float]) -> str:
    """The strip's reading: ``(top, text, confidence)`` per word, 30 px high."""
    rows = [HEADER]
    for number, (top, text, confidence) in enumerate(reads, 1):
        rows.append(
            f"5\t1\t1\t1\t{number}\t1\t20\t{top}\t{20 * len(text)}\t30\t{confidence}\t{text}"
        )
    return "\n".join(rows) + "\n"


def test_only_words_under_the_floor_are_read_again() -> None:
    words = [_word("Net", 96.0), _word("22", 88.5), _word("%", REREAD_BELOW), _word("x", 12.0)]
    assert [w.text for w in uncertain(words)] == ["22", "x"]


def test_a_page_of_noise_rereads_a_bounded_number_of_words_the_least_certain() -> None:
    words = [_word(str(i), 50.0 + (i % 30)) for i in range(MAX_REREAD_WORDS + 50)]
    low = uncertain(words)
    assert len(low) == MAX_REREAD_WORDS
    assert max(w.confidence for w in low) <= min(
        w.confidence for w in words if w not in low and w.confidence < REREAD_BELOW
    )
    assert [w.text for w in low] == [w.text for w in words if w in low]  # page order kept


def test_the_strip_holds_each_word_cut_out_on_a_row_of_its_own() -> None:
    page = Image.new("L", (1000, 600), 255)
    draw = ImageDraw.Draw(page)
    draw.rectangle((100, 100, 159, 129), fill=0)  # the first word's ink
    draw.rectangle((170, 100, 400, 129), fill=0)  # a neighbour right after it
    draw.rectangle((500, 400, 539, 429), fill=0)  # the second word's ink
    first = TsvWord("abc", PixelBox(100, 100, 160, 130), 80.0, 1, 1)
    second = TsvWord("de", PixelBox(500, 400, 540, 430), 70.0, 1, 2)
    strip = word_strip(page, [first, second])
    assert strip is not None
    image = Image.open(io.BytesIO(strip.png))
    assert image.mode == "L"
    assert len(strip.rows) == 2
    (top1, bottom1), (top2, _) = strip.rows
    assert bottom1 < top2  # white between them
    assert top2 - bottom1 >= bottom1 - top1
    for top, bottom in strip.rows:
        row = image.crop((0, top, image.width, bottom))
        assert row.getextrema()[0] == 0  # the word's ink is on its row
    # a margin of 10 px (0.35 of 30 px) each side, 20 px of white left and right
    assert image.width == 60 + 2 * 10 + 2 * 20
    # the neighbour 10 px to the right of the first word stays out of its cut
    assert image.crop((20 + 10 + 60, top1, image.width, bottom1)).getextrema() == (255, 255)
    assert word_strip(page, []) is None


def test_a_word_at_the_pages_edge_is_cut_within_the_page() -> None:
    page = Image.new("L", (200, 100), 255)
    ImageDraw.Draw(page).rectangle((0, 0, 39, 29), fill=0)
    strip = word_strip(page, [TsvWord("ab", PixelBox(0, 0, 40, 30), 70.0, 1, 1)])
    assert strip is not None
    image = Image.open(io.BytesIO(strip.png))
    ((top, bottom),) = strip.rows
    assert bottom - top == 30 + 10  # the margin below only
    assert image.width == 40 + 10 + 2 * 20
    # no black band where the margin would reach past the page: the ink is the word's
    ink = image.point(lambda v: 255 if v < 128 else 0).getbbox()
    assert ink == (20, top, 60, top + 30)


def _strip(*words: TsvWord) -> WordStrip:
    return WordStrip(b"", words, tuple((100 + 100 * i, 140 + 100 * i) for i in range(len(words))))


def test_a_word_read_alike_takes_the_higher_confidence_and_keeps_its_box() -> None:
    sure, alike, other, split, lower = (
        _word("Net", 97.0),
        _word("22", 84.0, top=200),
        _word("PO-43285", 86.0, top=300),
        _word("23%", 83.0, top=400),
        _word("1", 89.0, top=500),
    )
    strip = _strip(alike, other, split, lower)
    tsv = _strip_tsv(
        (105, "22", 97.0),  # the same characters, sure: raised
        (205, "P0-43285", 96.0),  # other characters: the page's reading stays
        (305, "23", 95.0),  # split into two words: stays
        (305, "%", 95.0),
        (405, "1", 60.0),  # alike but less sure: stays as it was
    )
    out = confirm([sure, alike, other, split, lower], strip, tsv)
    assert [(w.text, w.confidence) for w in out] == [
        ("Net", 97.0),
        ("22", 97.0),
        ("PO-43285", 86.0),
        ("23%", 83.0),
        ("1", 89.0),
    ]
    assert out[1].box == alike.box and out[1].line == alike.line


def test_a_word_the_second_reading_misses_keeps_its_confidence() -> None:
    word = _word("Stuck", 88.0)
    out = confirm([word], _strip(word), _strip_tsv((900, "Stuck", 99.0)))  # on no row
    assert out == [word]
    assert parse_tsv(_strip_tsv()) == []
    assert confirm([word], _strip(word), _strip_tsv()) == [word]
