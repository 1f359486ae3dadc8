"""A tax breakdown row's rate where the row prints it without its "%": read by the
column header over it.

Every FeRD and symtrax sample of the public ZUGFeRD corpus prints its breakdown as a
table whose rate column is headed "Steuersatz [%]" or "USt. %" and whose rows print the
bare number ("19"). The header proves the role the sign would. ``pdftotext -layout``
places a row's numbers right-aligned under left-aligned headers, so a number may stand
under no header cell at all ("USt. %" ending at column 68, its "0" printed at 73): the
row's numbers are then matched to the header's cells in print order (the k-th number to
one cell right of the (k-1)-th's), nearest by centre, and a rate is read only where
that matching names exactly one number under a rate cell.
"""

from __future__ import annotations

import re
from dataclasses import replace

from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.row_arithmetic import parse_tax_row, tax_gap
from pipeline.invoice import CENT, Printed

#: A column header cell that names a rate in percent ("Steuersatz [%]", "VAT rate", "Taux").
RATE_CELL = re.compile(
    r"%|satz|\brate\b|taux|aliquot|stawk|sats\b|tarief|sazba|kulcs|\btasa|prozent|procent"
    r"|percent",
    re.IGNORECASE,
)
#: How far above a tax row its column header may stand (other tax rows between).
RATE_HEADER_REACH = 8

Cell = tuple[int, int, str]


def tax_row_numbers(doc: Layout, line: Line) -> list[Printed]:
    """The numbers of a tax breakdown row, a rate printed without its "%" counted as a
    rate where the column header over it names one ("19" under "Steuersatz [%]")."""
    printed = doc.numbers_on(line)
    if any(p.percent for p in printed) or not printed:
        return printed
    header = header_above(doc, line, printed)
    if header is None:
        return printed
    cells = _cells(header)
    columns = _by_overlap(cells, printed) or _in_order(cells, printed)
    if columns is None:
        return printed
    rated = [RATE_CELL.search(cells[c][2]) is not None for c in columns]
    if sum(rated) != 1:
        return printed
    return [replace(p, percent=True) if r else p for p, r in zip(printed, rated, strict=True)]


def header_above(doc: Layout, line: Line, printed: list[Printed]) -> Line | None:
    """The nearest line above ``line`` (same page, within :data:`RATE_HEADER_REACH`) that
    prints words and no number: the column header of the rows under it. A caption whose
    words stand over none of ``printed`` (a tax category printed over its row,
    "Umsatzsteuer (E)" left of the numbers) heads no column and is passed over."""
    for number in range(line.number - 1, max(0, line.number - RATE_HEADER_REACH) - 1, -1):
        above = doc.line(number)
        if above is None or above.page != line.page:
            return None
        if not above.text.strip() or re.search(r"\d", above.text):
            continue
        if not any(_overlaps(cell, p) for cell in _cells(above) for p in printed):
            continue
        return above
    return None


def _cells(line: Line) -> list[Cell]:
    """The line's cells: runs of words split by two spaces or more."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line.text)]


def _overlaps(cell: Cell, p: Printed) -> bool:
    return cell[0] < p.end and cell[1] > p.start


def _by_overlap(cells: list[Cell], printed: list[Printed]) -> list[int] | None:
    """Each number's cell where every number stands under exactly one cell."""
    out = []
    for p in printed:
        over = [i for i, cell in enumerate(cells) if _overlaps(cell, p)]
        if len(over) != 1:
            return None
        out.append(over[0])
    return out


def _in_order(cells: list[Cell], printed: list[Printed]) -> list[int] | None:
    """The numbers matched to cells in print order (each to a cell right of the one
    before it), the sum of centre distances least; None where the row prints more
    numbers than the header has cells, or two matchings tie (nothing tells which)."""
    n, m = len(printed), len(cells)
    if n > m:
        return None
    centre = [(c[0] + c[1]) / 2 for c in cells]
    at = [(p.start + p.end) / 2 for p in printed]
    inf = float("inf")
    # best[i][j]: least cost of matching the first i numbers into the first j cells
    best = [[inf] * (m + 1) for _ in range(n + 1)]
    ties = [[False] * (m + 1) for _ in range(n + 1)]
    for j in range(m + 1):
        best[0][j] = 0.0
    for i in range(1, n + 1):
        for j in range(i, m + 1):
            skip, take = best[i][j - 1], best[i - 1][j - 1] + abs(at[i - 1] - centre[j - 1])
            best[i][j] = min(skip, take)
            tie_of = ties[i][j - 1] if skip < take else ties[i - 1][j - 1]
            ties[i][j] = (skip == take and skip < inf) or tie_of
    if best[n][m] == inf or ties[n][m]:
        return None
    out: list[int] = []
    i, j = n, m
    while i > 0:
        if best[i][j] == best[i][j - 1]:
            j -= 1
            continue
        out.append(j - 1)
        i, j = i - 1, j - 1
    return out[::-1]


@per_layout
def tax_rows(doc: Layout) -> list[int]:
    """Lines that read as a tax breakdown row: a rate and exactly two other numbers, with
    base x rate = amount (within two cents). Item rows print three numbers and more."""
    out = []
    for line in doc.lines:
        printed = tax_row_numbers(doc, line)
        if sum(1 for p in printed if not p.percent) != 2:
            continue
        read = parse_tax_row(printed)
        if read is not None and tax_gap(read) <= CENT * 2:
            out.append(line.number)
    return out
