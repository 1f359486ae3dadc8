"""Tesseract's TSV as words with boxes, its lines, and a page text that keeps the columns.

Tesseract's TSV has one row per page, block, paragraph, line and word (``level`` 1–5),
each with its box in pixels; words carry a confidence (0–100). The words are kept with
their block and line numbers and their boxes; the page text is rebuilt from positions
by the same layout as a PDF's text layer (:mod:`pipeline.documents.grid`: rows by
vertical centre, columns kept, a narrow gap one space), which also joins halves of one
word that tesseract's layout analysis cut apart into two lines (the decimals of a
right-aligned amount become a column of their own). Large vertical gaps become one
blank line.

Invariants: ``page.text[w.start:w.end] == w.text`` for every word; at least one space
separates words on a row; rows never hold a word twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.documents.grid import Placed, layout_page

_WORD_LEVEL = 5
_COLUMNS = 12


@dataclass(frozen=True, slots=True)
class PixelBox:
    """A rectangle in the page image's pixels from its top-left corner."""

    left: int
    top: int
    right: int
    bottom: int


@dataclass(frozen=True, slots=True)
class OcrWord:
    """A recognised word: ``text`` is ``page.text[start:end]``; ``confidence`` is 0–100;
    ``block`` and ``line`` are tesseract's (reading order of its layout analysis);
    ``marks`` the ink above and below each character
    (:func:`pipeline.documents.ocr_marks.mark_codes`), None where not looked at."""

    text: str
    start: int
    end: int
    box: PixelBox
    confidence: float
    block: int
    line: int
    marks: str | None = None


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One of tesseract's lines: its words joined by spaces, in its block."""

    text: str
    box: PixelBox
    block: int


@dataclass(frozen=True, slots=True)
class TsvWord:
    text: str
    box: PixelBox
    confidence: float
    block: int
    line: int
    marks: str | None = None


def parse_tsv(tsv: str) -> list[TsvWord]:
    """The words of tesseract's TSV (level 5, non-blank), in its reading order; the
    line number is made unique per page (block, paragraph and line combined)."""
    words: list[TsvWord] = []
    lines: dict[tuple[str, str, str], int] = {}
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < _COLUMNS or cells[0] != str(_WORD_LEVEL):
            continue
        text = cells[11].strip()
        if not text:
            continue
        left, top, width, height = (int(cell) for cell in cells[6:10])
        key = (cells[2], cells[3], cells[4])
        line = lines.setdefault(key, len(lines) + 1)
        box = PixelBox(left, top, left + width, top + height)
        words.append(TsvWord(text, box, max(0.0, float(cells[10])), int(cells[2]), line))
    return words


def tesseract_lines(words: list[TsvWord]) -> tuple[OcrLine, ...]:
    """Tesseract's own lines, in its reading order (block by block)."""
    grouped: dict[int, list[TsvWord]] = {}
    for word in words:
        grouped.setdefault(word.line, []).append(word)
    out = []
    for members in grouped.values():
        box = PixelBox(
            min(w.box.left for w in members),
            min(w.box.top for w in members),
            max(w.box.right for w in members),
            max(w.box.bottom for w in members),
        )
        out.append(OcrLine(" ".join(w.text for w in members), box, members[0].block))
    return tuple(out)


def layout_text(words: list[TsvWord]) -> tuple[str, tuple[OcrWord, ...]]:
    """The page text with columns kept, and the words with their offsets into it: the
    words laid out by :func:`pipeline.documents.grid.layout_page` (halves of a word
    that tesseract cut into two lines joined), each line ended by a newline as
    tesseract's own text is, and at most one blank line for a vertical gap."""
    if not words:
        return "", ()
    blocks = {word.line: word.block for word in words}
    page = layout_page(
        [
            Placed(w.text, w.box.left, w.box.top, w.box.right, w.box.bottom, w.confidence, w.line)
            for w in words
        ],
        max_empty_lines=1,
    )
    # a word the layout joined from two halves has no marks (its text is no TSV word's)
    marks = {(w.box, w.text): w.marks for w in words}
    placed = []
    for word in page.words:
        box, line = word.box, word.box.line
        assert line is not None and box.confidence is not None  # every TSV word has both
        pixels = PixelBox(round(box.left), round(box.top), round(box.right), round(box.bottom))
        placed.append(
            OcrWord(
                word.text,
                word.start,
                word.end,
                pixels,
                box.confidence,
                blocks[line],
                line,
                marks.get((pixels, word.text)),
            )
        )
    return page.text + "\n", tuple(placed)
