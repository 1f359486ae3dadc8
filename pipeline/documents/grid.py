"""A page's words with boxes laid out as text on a character grid, columns kept.

The one layout of positioned words into text: a PDF's text layer
(:mod:`pipeline.documents.pdf_text`) and tesseract's words
(:mod:`pipeline.documents.ocr_layout`) are both read through :func:`layout_page`.

Extraction reads a page as lines of text whose columns are runs of two spaces or more
(a table's cells, a label and its value): what ``pdftotext -layout`` prints. PDFium's
own text, and any OCR engine's word list, keeps the words and their boxes but not the
spacing between them: ``Qty  Unit price`` and a row's numbers run together with one
space, blank lines vanish, and a table can no longer be read (issue 43: 8 of 9
clean generated invoices printed to PDF went to review from PDFium's text where 24 of
30 succeed from the same pages laid out here, and the public ZUGFeRD samples read
this way decide as their ``pdftotext -layout`` text does).

The layout: words are grouped into lines by their vertical centres (a word joins the
line whose centre is within half a line height of its own), each line's words sorted
left to right and placed at the column ``round(left / character width)`` (the median
width of one character over the page's words); two words whose boxes are at most two
characters apart are one space apart (a word gap, however wide the capitals before it
ran: "ELEKTRON Industrieservice GmbH" stays one cell), farther apart at least two (a
column gap stays a column gap). On a monospaced page (nearly all words share one
advance per character, as a text layer's boxes of a print in DejaVu Sans Mono or
Courier do) a gap is exactly its count of spaces: "11  Gazole" keeps its column gap
there, which the two-character rule would close. A vertical gap of *n* line pitches
(the median distance between neighbouring lines) leaves *n* - 1 empty lines, at most
three (a block's end; an OCR page leaves at most one, as its reader always did).

Halves of one word that an OCR engine's layout analysis cut apart into two of its
lines (the decimals of a right-aligned amount become a column of their own) are joined
again: two neighbours on a row with different :attr:`Placed.line` (None for a text
layer, which never joins) closer than ``JOIN_GAP`` characters; the joined word keeps
the lower confidence.

Every placed word keeps its box: :attr:`GridPage.words` gives its offsets into
:attr:`GridPage.text` (``text[w.start:w.end] == w.text``).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: How far right a page may reach, in characters (a wide landscape table).
MAX_COLUMNS = 400
#: A gap wider than this many characters between two boxes is a column gap.
COLUMN_GAP = 2.0
#: A page is monospaced when this share of its words have the same advance per
#: character, within ``ADVANCE_TOLERANCE`` of the median.
MONOSPACED_SHARE = 0.95
ADVANCE_TOLERANCE = 0.02
#: Lines closer than this many line heights (times two) set the page's line pitch.
BLOCK_GAP = 1.5
#: The most empty lines one vertical gap leaves.
MAX_EMPTY_LINES = 3
#: Halves of one word that an OCR engine put in two lines are closer than this many
#: characters (a space in a monospaced print is about 1.1 character widths between
#: glyph boxes).
JOIN_GAP = 0.75


@dataclass(frozen=True, slots=True)
class Placed:
    """A word as a layout reads it: its text and box (left, top, right, bottom; any unit,
    top < bottom); an OCR engine's ``confidence`` (0–100) and its own ``line`` (an id,
    unique on the page), None for a text layer."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    confidence: float | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class GridWord:
    """A word on the grid: ``text`` at ``start:end`` of the page's text, with its box."""

    text: str
    start: int
    end: int
    box: Placed


@dataclass(frozen=True, slots=True)
class GridPage:
    """One page's text on the grid and the words placed in it."""

    text: str
    words: tuple[GridWord, ...]


def _lines(words: Sequence[Placed]) -> list[list[Placed]]:
    """Words grouped into lines by vertical centre, top to bottom."""
    heights = [w.bottom - w.top for w in words if w.bottom > w.top]
    half = (statistics.median(heights) if heights else 1.0) / 2
    lines: list[tuple[float, list[Placed]]] = []
    for word in sorted(words, key=lambda w: ((w.top + w.bottom) / 2, w.left)):
        centre = (word.top + word.bottom) / 2
        if lines and abs(centre - lines[-1][0]) <= half:
            lines[-1][1].append(word)
            continue
        lines.append((centre, [word]))
    return [sorted(line, key=lambda w: w.left) for _, line in lines]


def layout_page(words: Sequence[Placed], *, max_empty_lines: int = MAX_EMPTY_LINES) -> GridPage:
    """``words`` laid out as one page of text (see the module's description); a
    vertical gap leaves at most ``max_empty_lines`` empty lines."""
    words = [w for w in words if w.text.strip()]
    if not words:
        return GridPage("", ())
    widths = [(w.right - w.left) / len(w.text) for w in words if w.right > w.left]
    char = statistics.median(widths) if widths else 1.0
    heights = [w.bottom - w.top for w in words if w.bottom > w.top]
    line_height = statistics.median(heights) if heights else 1.0
    origin = min(w.left for w in words)
    monospaced = _monospaced(words, char)
    lines = _lines(words)
    centres = [statistics.median((w.top + w.bottom) / 2 for w in line) for line in lines]
    steps = [b - a for a, b in itertools.pairwise(centres) if 0 < b - a]
    near = [d for d in steps if d <= BLOCK_GAP * 2 * line_height]
    pitch = statistics.median(near) if near else line_height * 1.2
    out: list[str] = []
    placed: list[GridWord] = []
    offset = 0
    for k, line in enumerate(lines):
        if k:
            empty = min(max_empty_lines, max(0, round((centres[k] - centres[k - 1]) / pitch) - 1))
            out += [""] * empty
            offset += empty
        text = ""
        last: Placed | None = None
        for word in line:
            if text and _split(placed[-1].box, word, char):
                before = placed.pop()  # the halves of one word: joined, no space
                joined = _joined(before.box, word)
                placed.append(
                    GridWord(joined.text, before.start, before.end + len(word.text), joined)
                )
                text += word.text
                last = joined
                continue
            column = min(MAX_COLUMNS, round((word.left - origin) / char))
            if text and last is not None and monospaced(last) and monospaced(word):
                column = max(column, len(text) + 1)  # a monospaced print: its own spaces
            elif text and last is not None and word.left - last.right <= COLUMN_GAP * char:
                column = len(text) + 1  # a word gap: one space, wherever wide capitals end
            elif text:
                column = max(column, len(text) + 2)  # a column gap stays a column gap
            text = text.ljust(column)
            placed.append(
                GridWord(word.text, offset + len(text), offset + len(text) + len(word.text), word)
            )
            text += word.text
            last = word
        out.append(text)
        offset += len(text) + 1
    return GridPage("\n".join(out), tuple(placed))


def _monospaced(words: Sequence[Placed], char: float) -> Callable[[Placed], bool]:
    """Whether a word is set in the advance of a monospaced page: always False unless
    nearly all the page's words share one advance per character (a text layer's boxes
    are advance-wide; an OCR engine's ink boxes never are). There a gap is exactly its
    spaces' count of characters, and two spaces ("11  Gazole") are a column gap that a
    proportional font's rule (a gap of up to two median characters is one space) would
    close."""

    def advance(word: Placed) -> float:
        return (word.right - word.left) / len(word.text)

    def on_advance(word: Placed) -> bool:
        return abs(advance(word) - char) <= ADVANCE_TOLERANCE * char

    measured = [w for w in words if w.right > w.left]
    share = sum(map(on_advance, measured)) / len(measured) if measured else 0.0
    return on_advance if share >= MONOSPACED_SHARE else _never


def _never(_word: Placed) -> bool:
    return False


def _split(left: Placed, right: Placed, char: float) -> bool:
    """One printed word that an OCR engine cut in two, less than a space apart: halves
    in different lines of its own (a column split, as in ``4'976.`` | ``87`` of a
    right-aligned amount), or in one line, a number cut at its decimal separator
    (``41396,`` | ``42``: a monospaced comma leaves about half a character of white on
    each side, which tesseract reads as a word gap)."""
    return (
        left.line is not None
        and right.line is not None
        and (left.line != right.line or _number_cut(left.text, right.text))
        and right.left - left.right < JOIN_GAP * char
    )


def _number_cut(left: str, right: str) -> bool:
    """``left`` + ``right`` is a number cut at one separator: ``41396,`` | ``42`` or
    ``765`` | ``,06`` (or ``,``)."""
    if not right.replace(",", "").replace(".", "").isdigit() and right not in (",", "."):
        return False
    if left[-1:] in (",", ".") and left[-2:-1].isdigit():
        return right[0].isdigit()
    decimals = right[1:]
    return left[-1:].isdigit() and right[0] in (",", ".") and (not decimals or decimals.isdigit())


def _joined(left: Placed, right: Placed) -> Placed:
    confidences = [c for c in (left.confidence, right.confidence) if c is not None]
    return Placed(
        left.text + right.text,
        min(left.left, right.left),
        min(left.top, right.top),
        max(left.right, right.right),
        max(left.bottom, right.bottom),
        min(confidences) if confidences else None,
        left.line,
    )
