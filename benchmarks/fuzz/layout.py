"""The choices one fuzzed rendering makes: :class:`Layout`.

The default is the fuzzer's plain invoice (labels before values, the usual column
order, figures for dates, one page); each transformation
(:mod:`benchmarks.fuzz.transforms`) changes some of these choices. The renderer
(:mod:`benchmarks.fuzz.render`) reads nothing else, so a family of transformations is
fully described by the :class:`Layout` it produces and the facts it changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchmarks.fuzz.vocabulary import COLUMNS


@dataclass
class Layout:
    #: Item-table columns after the position number, in print order.
    columns: tuple[str, ...] = COLUMNS
    #: Table header words: the language's full words, its abbreviations, or no header row.
    headers: Literal["full", "abbr", "none"] = "full"
    #: Language of the table header words (None: the invoice's own).
    header_language: str | None = None
    #: The unit printed after each quantity ("3 pcs").
    units: bool = True
    #: Items as a table, as sentences, or as an e-mail's bullet list.
    items: Literal["table", "prose", "email"] = "table"
    #: Where header and total labels sit: before, after, below their value, or in a row
    #: of labels above a row of values.
    labels: Literal["before", "after", "below", "row"] = "before"
    #: Letterhead and header fields printed side by side.
    side_by_side: bool = False
    #: Issue date: labelled, in a sentence, or only on a letter's place-and-date line.
    issue: Literal["label", "sentence", "letter"] = "label"
    #: Due date: labelled, in a sentence, as a payment term in days, or not printed.
    due: Literal["label", "sentence", "term", "none"] = "label"
    #: Dates in words ("3 March 2026") instead of figures.
    words: bool = False
    #: Field-like noise: order and customer numbers, phone, a delivery date, a year in
    #: the letterhead, a company-register number.
    noise: bool = False
    #: The item table split over two pages with its header repeated.
    pages: bool = False
