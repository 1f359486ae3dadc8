"""A page's words with boxes laid out as text on a character grid, columns kept.

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
column gap stays a column gap); a vertical gap of *n* line pitches (the median
distance between neighbouring lines) leaves *n* - 1 empty lines, at most three (a
block's end).

Every placed word keeps its box: :attr:`GridPage.words` gives its offsets into
:attr:`GridPage.text` (``text[w.start:w.end] == w.text``).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: How far right a page may reach, in characters (a wide landscape table).
MAX_COLUMNS = 400
#: A gap wider than this many characters between two boxes is a column gap.
COLUMN_GAP = 2.0
#: Lines closer than this many line heights (times two) set the page's line pitch.
BLOCK_GAP = 1.5
#: The most empty lines one vertical gap leaves.
MAX_EMPTY_LINES = 3


@dataclass(frozen=True, slots=True)
class Placed:
    """A word as a layout reads it: its text and box (left, top, right, bottom; any unit,
    top < bottom)."""

    text: str
    left: float
    top: float
    right: float
    bottom: float


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


def layout_page(words: Sequence[Placed]) -> GridPage:
    """``words`` laid out as one page of text (see the module's description)."""
    words = [w for w in words if w.text.strip()]
    if not words:
        return GridPage("", ())
    widths = [(w.right - w.left) / len(w.text) for w in words if w.right > w.left]
    char = statistics.median(widths) if widths else 1.0
    heights = [w.bottom - w.top for w in words if w.bottom > w.top]
    line_height = statistics.median(heights) if heights else 1.0
    origin = min(w.left for w in words)
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
            empty = min(MAX_EMPTY_LINES, max(0, round((centres[k] - centres[k - 1]) / pitch) - 1))
            out += [""] * empty
            offset += empty
        text = ""
        last_right: float | None = None
        for word in line:
            column = min(MAX_COLUMNS, round((word.left - origin) / char))
            if text and last_right is not None and word.left - last_right <= COLUMN_GAP * char:
                column = len(text) + 1  # a word gap: one space, wherever wide capitals end
            elif text:
                column = max(column, len(text) + 2)  # a column gap stays a column gap
            text = text.ljust(column)
            placed.append(
                GridWord(word.text, offset + len(text), offset + len(text) + len(word.text), word)
            )
            text += word.text
            last_right = word.right
        out.append(text)
        offset += len(text) + 1
    return GridPage("\n".join(out), tuple(placed))
