"""How a description cell sits in its row (:class:`CellShape`): the rows of one table
print their descriptions alike, so the shape the model chose on some rows names the
cell it would choose on the others (:mod:`pipeline.extraction.items`)."""

from __future__ import annotations

import re
from typing import NamedTuple

from pipeline.extraction.layout import Layout
from pipeline.extraction.rows import COLUMN_GAP, Row


class CellShape(NamedTuple):
    """How a description cell sits in its row: what stands just before it (``BOL``, a
    column ``GAP``, a number ``NUM``, a quantity's ``UNIT`` or the word itself), just
    after it (``EOL``, ``GAP``, ``NUM`` or the word) and how many lines the row spans.
    The rows of one table print their descriptions the same way, so the shape the
    model chose on some rows names the cell it would choose on the others."""

    left: str
    right: str
    lines: int


def _token(word: str) -> str:
    return "NUM" if re.match(r"^\W*\d", word) else word.casefold()


def cell_shape(doc: Layout, row: Row, start: int, end: int) -> CellShape:
    """The :class:`CellShape` of the cell at page offsets ``start:end`` of ``row``'s
    first line."""
    line = row.first
    page = doc.pages[line.page - 1]
    before, after = page[line.start : start], page[end : line.end]
    words = before.split()
    if not words:
        left = "BOL"
    elif COLUMN_GAP.search(before[-2:]):
        left = "GAP"
    elif _token(words[-1]) != "NUM" and len(words) > 1 and _token(words[-2]) == "NUM":
        left = "UNIT"
    else:
        left = _token(words[-1])
    if not after.strip():
        right = "EOL"
    elif COLUMN_GAP.match(after[:2]):
        right = "GAP"
    else:
        right = _token(after.split()[0])
    return CellShape(left, right, page.count("\n", line.start, row.end) + 1)
