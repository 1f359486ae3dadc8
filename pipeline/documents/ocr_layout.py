"""Tesseract's TSV as words with boxes, its lines, and a page text that keeps the columns.

Tesseract's TSV has one row per page, block, paragraph, line and word (``level`` 1–5),
each with its box in pixels; words carry a confidence (0–100). The words are kept with
their block and line numbers and their boxes; the page text is rebuilt from positions,
the way ``pdftotext -layout`` prints: words whose vertical centres lie close form one
row, rows go top to bottom, and a word after a wide gap starts at the character column
its left edge falls on (x divided by the page's median character width), so a table's
columns stay columns that the text extraction can read; a narrow gap (a space inside a
phrase) is one space. Large vertical gaps become one blank line.

Halves of one word that tesseract's layout analysis cut apart into two lines (the
decimals of a right-aligned amount become a column of their own) are joined again.

Invariants: ``page.text[w.start:w.end] == w.text`` for every word; at least one space
separates words on a row; rows never hold a word twice.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

_WORD_LEVEL = 5
_COLUMNS = 12
#: A gap narrower than this many character widths is one space, wider ones keep columns.
_SPACE_GAP = 2.0
#: Halves of one word that tesseract put in two lines are closer than this (a space in
#: a monospaced print is about 1.1 character widths between glyph boxes).
_JOIN_GAP = 0.75


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
    ``block`` and ``line`` are tesseract's (reading order of its layout analysis)."""

    text: str
    start: int
    end: int
    box: PixelBox
    confidence: float
    block: int
    line: int


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
    """The page text with columns kept, and the words with their offsets into it."""
    if not words:
        return "", ()
    char_width = statistics.median((w.box.right - w.box.left) / len(w.text) for w in words)
    char_width = max(char_width, 1.0)
    height = max(statistics.median(w.box.bottom - w.box.top for w in words), 1)
    origin = min(w.box.left for w in words)
    rows = _rows(words, height)
    pitch = _pitch(rows, height)
    out: list[str] = []
    placed: list[OcrWord] = []
    offset = 0
    previous: float | None = None
    for row in rows:
        centre = statistics.fmean(_centre(w) for w in row)
        if previous is not None and centre - previous > 1.8 * pitch:
            out.append("\n")
            offset += 1
        previous = centre
        line = ""
        last: TsvWord | None = None
        for word in sorted(row, key=lambda w: w.box.left):
            gap = word.box.left - last.box.right if last is not None else None
            if last is not None and gap is not None and _split(last, word, gap, char_width):
                line += word.text
                last = _joined(last, word)
                before = placed.pop()
                placed.append(_place(last, before.start))
                continue
            column = round((word.box.left - origin) / char_width)
            if gap is not None and gap < _SPACE_GAP * char_width:
                column = len(line) + 1  # a space inside a phrase, not a column gap
            column = max(column, len(line) + 1 if line else 0)
            last = word
            line += " " * (column - len(line))
            placed.append(_place(word, offset + len(line)))
            line += word.text
        out.append(line + "\n")
        offset += len(line) + 1
    return "".join(out), tuple(placed)


def _split(left: TsvWord, right: TsvWord, gap: int, char_width: float) -> bool:
    """One printed word that tesseract's layout analysis cut in two: the halves sit in
    different lines of its own (a column split, as in ``4'976.`` | ``87`` of a
    right-aligned amount) with less than a space between them."""
    return left.line != right.line and gap < _JOIN_GAP * char_width


def _joined(left: TsvWord, right: TsvWord) -> TsvWord:
    box = PixelBox(
        min(left.box.left, right.box.left),
        min(left.box.top, right.box.top),
        max(left.box.right, right.box.right),
        max(left.box.bottom, right.box.bottom),
    )
    confidence = min(left.confidence, right.confidence)
    return TsvWord(left.text + right.text, box, confidence, left.block, left.line)


def _place(word: TsvWord, start: int) -> OcrWord:
    end = start + len(word.text)
    return OcrWord(word.text, start, end, word.box, word.confidence, word.block, word.line)


def _centre(word: TsvWord) -> float:
    return (word.box.top + word.box.bottom) / 2


def _rows(words: list[TsvWord], height: float) -> list[list[TsvWord]]:
    """Words grouped into rows by vertical centre, top to bottom: a word joins the row
    whose mean centre is within half a median word height of its own."""
    rows: list[list[TsvWord]] = []
    centres: list[float] = []
    for word in sorted(words, key=_centre):
        centre = _centre(word)
        if rows and abs(centre - centres[-1]) <= height / 2:
            rows[-1].append(word)
            centres[-1] = statistics.fmean(_centre(w) for w in rows[-1])
        else:
            rows.append([word])
            centres.append(centre)
    return rows


def _pitch(rows: list[list[TsvWord]], height: float) -> float:
    """The usual distance between consecutive rows' centres (the line spacing)."""
    centres = [statistics.fmean(_centre(w) for w in row) for row in rows]
    gaps = [b - a for a, b in itertools.pairwise(centres)]
    return statistics.median(gaps) if gaps else float(height) * 1.2
