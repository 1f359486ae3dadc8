"""The invoice's table: its rows in document order, and where arithmetic proves it whole.

Where it is whole (:func:`whole_table`), the grammar asks the items row by row
(:func:`pipeline.extraction.answer.answer_schema`), only of the rows whose
description is a choice (:func:`table_rows`); code fills in the others, the prompt
shows their lines as one marker line (:func:`hidden_lines`) and grounding completes
a row the model left out (:mod:`pipeline.extraction.items`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.rows import Row, item_cells, rows_by_amount, stacked
from pipeline.invoice import CENT

#: Bounds of the grammar's item list: rows, and a description's length.
MAX_ITEMS = 200
MAX_DESCRIPTION_CHARS = 80


def printed_table(doc: Layout, *, exact: bool = True) -> list[Row]:
    """Every row whose own numbers add up exactly (``exact=False``: within two cents),
    with an amount in cents, once per printed amount and in document order.

    A row is read from the line nearest its amount that starts one, never from a
    blank line or a column header above it (both also read as the start of the same
    row); a stacked row from its description line, even where its number line reads
    as a row alone ("1. Software licence, annual" over "2 pcs x 1,636.69 = 3,273.38":
    the number line's only cells are "x" and "(Tax")."""
    table = []
    for starts in rows_by_amount(doc, exact=exact):
        described = [row for row in starts if stacked(doc, row)]
        table.append((described or starts)[-1])
    return table


def whole_table(doc: Layout) -> list[Row] | None:
    """:func:`printed_table` where arithmetic proves it whole, else None: its amounts
    sum, to the cent, to a total printed on a line that is no row and prints no rate
    (the net; a tax breakdown line prints a rate and may repeat one row's amount as
    its base), and no row's amount is zero (the sum cannot vouch for it:
    "Subtotal: 15636.94 / VAT 0% on 15636.94: 0.00" reads as 15636.94 x 0 = 0.00).

    Then the table's rows are the invoice's items, each read by code: a row the
    arithmetic cannot read (a flat fee, an amount one cent off) leaves the sum short
    of the net, and a line too many that happens to add up puts it over."""
    table = printed_table(doc)
    return table if _sums_to_a_total(doc, table, Decimal(0)) else None


def near_whole_table(doc: Layout) -> list[Row] | None:
    """The table where one row or more reads as quantity x price = amount only within
    two cents (a rounding slip, or the off-by-a-cent trap) and its amounts sum to a
    printed total within two cents a slip, else None.

    For the grammar only: it asks these rows one by one, as for :func:`whole_table`,
    instead of letting the model cite any line at any position (given that, SmolLM2
    cited the tax line for five of seven items of eval invoice gen-12, French, one row
    a cent off). Grounding reads each row as printed and validation reports the slip."""
    table = printed_table(doc, exact=False)
    slips = sum(not row.read.exact for row in table)
    if not slips or whole_table(doc) is not None:
        return None
    return table if _sums_to_a_total(doc, table, CENT * 2 * slips) else None


def _sums_to_a_total(doc: Layout, table: list[Row], slack: Decimal) -> bool:
    """Whether ``table``'s amounts sum, within ``slack``, to a total printed on a line
    that is no row and prints no rate, with no row's amount zero."""
    if not table or any(row.read.line_amount.value == 0 for row in table):
        return False
    total = sum((row.read.line_amount.value for row in table), Decimal(0))
    inside: set[int] = set()  # lines a row is printed on (a row's lines follow its first)
    for row in table:
        at: Line | None = row.first
        while at is not None and at.page == row.first.page and at.end <= row.end:
            inside.add(at.number)
            at = doc.line(at.number + 1)
    for line in doc.lines:
        if line.number in inside:
            continue
        printed = doc.numbers_on(line)
        if not any(n.percent for n in printed) and any(
            abs(n.value - total) <= slack for n in printed
        ):
            return True
    return False


class TableRow(NamedTuple):
    """One row of a table arithmetic proves whole: its first line and the cells that can
    be its description (most rows print one)."""

    line: int
    cells: tuple[str, ...]
    #: Every line the row is printed on (two for a stacked row).
    lines: tuple[int, ...]


@per_layout
def table_rows(doc: Layout) -> tuple[TableRow, ...] | None:
    """The item rows where arithmetic proves the table whole
    (:func:`~pipeline.extraction.table.whole_table`) or whole but for rows a cent or
    two off (:func:`~pipeline.extraction.table.near_whole_table`), else None.

    Once per layout: the grammar, ``max_tokens`` and grounding each ask for them."""
    table = whole_table(doc) or near_whole_table(doc)
    if table is None or len(table) > MAX_ITEMS:
        return None
    rows = []
    for row in table:
        first = row.first
        page = doc.pages[first.page - 1]
        spans = [(a, b) for a, b in item_cells(doc, row) if b - a <= MAX_DESCRIPTION_CHARS]
        cells = tuple(dict.fromkeys(page[a:b] for a, b in spans))
        if not cells:
            return None
        printed = {doc.line_at(first.page, a).number for a, _ in spans}
        printed.update(
            line.number
            for line in doc.lines[first.number - 1 :]
            if line.page == first.page and line.start < row.end
        )
        rows.append(TableRow(first.number, cells, tuple(sorted(printed))))
    return tuple(rows)


def hidden_lines(doc: Layout) -> frozenset[int]:
    """The lines the prompt does not show: those of a whole table's rows that print one
    description (code fills them in; the grammar asks nothing about them)."""
    rows = table_rows(doc)
    return frozenset(n for row in rows or () if len(row.cells) == 1 for n in row.lines)


@per_layout
def shown_layout(doc: Layout) -> Layout:
    """``doc`` with the lines the prompt hides left empty (every line keeps its number,
    numbers read with the document's decimal mark): what the header's candidates are
    taken from."""
    return doc.blanked(hidden_lines(doc))
