"""The invoice's table: its rows in document order, and where arithmetic proves it whole.

Where it is whole (:func:`whole_table`), the grammar asks the items row by row
(:func:`pipeline.extraction.answer.answer_schema`) and grounding completes a row the
model left out (:mod:`pipeline.extraction.items`).
"""

from __future__ import annotations

from decimal import Decimal

from pipeline.extraction.lines import Document
from pipeline.extraction.numbers import CENT, numbers_in
from pipeline.extraction.rows import Row, rows_by_amount, stacked


def printed_table(doc: Document, mark: str, space: bool, *, exact: bool = True) -> list[Row]:
    """Every row whose own numbers add up exactly (``exact=False``: within two cents),
    with an amount in cents, once per printed amount and in document order.

    A row is read from the line nearest its amount that starts one, never from a
    blank line or a column header above it (both also read as the start of the same
    row); a stacked row from its description line, even where its number line reads
    as a row alone ("1. Software licence, annual" over "2 pcs x 1,636.69 = 3,273.38":
    the number line's only cells are "x" and "(Tax")."""
    table = []
    for starts in rows_by_amount(doc, mark, space, exact=exact):
        described = [row for row in starts if stacked(doc, row)]
        table.append((described or starts)[-1])
    return table


def whole_table(doc: Document, mark: str, space: bool) -> list[Row] | None:
    """:func:`printed_table` where arithmetic proves it whole, else None: its amounts
    sum, to the cent, to a total printed on a line that is no row and prints no rate
    (the net; a tax breakdown line prints a rate and may repeat one row's amount as
    its base), and no row's amount is zero (the sum cannot vouch for it:
    "Subtotal: 15636.94 / VAT 0% on 15636.94: 0.00" reads as 15636.94 x 0 = 0.00).

    Then the table's rows are the invoice's items, each read by code: a row the
    arithmetic cannot read (a flat fee, an amount one cent off) leaves the sum short
    of the net, and a line too many that happens to add up puts it over."""
    table = printed_table(doc, mark, space)
    return table if _sums_to_a_total(doc, mark, space, table, Decimal(0)) else None


def near_whole_table(doc: Document, mark: str, space: bool) -> list[Row] | None:
    """The table where one row or more reads as quantity x price = amount only within
    two cents (a rounding slip, or the off-by-a-cent trap) and its amounts sum to a
    printed total within two cents a slip, else None.

    For the grammar only: it asks these rows one by one, as for :func:`whole_table`,
    instead of letting the model cite any line at any position (given that, SmolLM2
    cited the tax line for five of seven items of eval invoice gen-12, French, one row
    a cent off). Grounding reads each row as printed and validation reports the slip."""
    table = printed_table(doc, mark, space, exact=False)
    slips = sum(not row.read.exact for row in table)
    if not slips or whole_table(doc, mark, space) is not None:
        return None
    return table if _sums_to_a_total(doc, mark, space, table, CENT * 2 * slips) else None


def _sums_to_a_total(
    doc: Document, mark: str, space: bool, table: list[Row], slack: Decimal
) -> bool:
    """Whether ``table``'s amounts sum, within ``slack``, to a total printed on a line
    that is no row and prints no rate, with no row's amount zero."""
    if not table or any(row.read.line_amount.value == 0 for row in table):
        return False
    total = sum((row.read.line_amount.value for row in table), Decimal(0))
    spans = {(row.first.page, row.first.start, row.end) for row in table}
    for line in doc.lines:
        if any(p == line.page and a <= line.start and line.end <= b for p, a, b in spans):
            continue
        printed = numbers_in(line.text, mark, space_groups=space)
        if not any(n.percent for n in printed) and any(
            abs(n.value - total) <= slack for n in printed
        ):
            return True
    return False
