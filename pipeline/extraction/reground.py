"""Grounding a reviewer's correction: where the corrected value is printed.

A reviewer types a value in its canonical form (``1190.00``, ``2025-03-01``,
``EUR``, a name or an identifier). The system, not the reviewer, finds where the
document prints it, with the same locate-and-choose rules as a model's answer
(:mod:`pipeline.extraction.grounding`): an amount is matched by its reading in
the document's decimal mark and placed by the field's label; a date by the
printed forms that read as it; text and identifiers exact or normalised.

A value that is printed nowhere gets no evidence (None). The caller then keeps
the field's old span, so the evidence rule reports that the text there does not
show the value (``evidence_value_mismatch``): a person can still insist on such
a value, but only by overriding that named reason with a note.

A corrected line item or tax line is grounded as a whole
(:func:`ground_row_correction`): the row's evidence is the printed row whose
numbers are the corrected quantity, unit price and amount (and its rate, where
the row prints one) and which shows the description; a tax line's is the line
printing its rate, base and amount. The row nearest the old evidence wins, so a
correction that only fixes a misread number stays on its row.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation

from pipeline.extraction.answer import Answer
from pipeline.extraction.grounding import Grounder
from pipeline.extraction.layout import Line, layout_of
from pipeline.extraction.locate import Found
from pipeline.invoice import (
    SCALAR_FIELDS,
    Evidence,
    Evidenced,
    LineItem,
    TaxLine,
    normalise_text,
    numbers_in,
)

AMOUNT_FIELDS = ("net_total", "tax_total", "gross_total")
DATE_FIELDS = ("issue_date", "due_date")
#: The fields a reviewer may correct: every header value of the contract.
CORRECTABLE_FIELDS = SCALAR_FIELDS
#: The values of a row a reviewer may correct, per row group (paths such as
#: ``line_items[2].quantity``); a row's evidence is grounded again, never typed.
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "line_items": ("description", "quantity", "unit_price", "line_amount", "tax_rate"),
    "tax_lines": ("rate", "base", "amount"),
}
_ROW_PATH = re.compile(r"^(line_items|tax_lines)\[(\d{1,4})\]\.([a-z_]+)$")


def row_field(path: str) -> tuple[str, int, str] | None:
    """``("line_items", 2, "quantity")`` for ``line_items[2].quantity``; None when
    ``path`` names no correctable row value."""
    m = _ROW_PATH.match(path)
    if m is None or m[3] not in ROW_FIELDS[m[1]]:
        return None
    return m[1], int(m[2]), m[3]


def _empty_answer() -> Answer:
    return Answer(
        supplier=None,
        vat_id=None,
        number=None,
        issue_date=None,
        due_date=None,
        currency=None,
        iban=None,
        net=None,
        tax=None,
        gross=None,
        items=(),
        taxes=(),
    )


def _printed_amounts(g: Grounder, value: Decimal) -> list[str]:
    """Every printed form of ``value`` in the document, in reading order."""
    seen: list[str] = []
    for page in g.doc.pages:
        for p in numbers_in(page, g.mark, space_groups=g.space):
            if not p.percent and p.value == value and p.text not in seen:
                seen.append(p.text)
    return seen


def _date_forms(d: date) -> list[str]:
    day, month, year = d.day, d.month, d.year
    return [
        d.isoformat(),
        f"{day:02d}.{month:02d}.{year}",
        f"{day}.{month}.{year}",
        f"{day:02d}/{month:02d}/{year}",
        f"{month:02d}/{day:02d}/{year}",
        f"{day:02d}-{month:02d}-{year}",
        f"{day}/{month}/{year}",
    ]


def ground_correction(ocr_text: str, path: str, value: str) -> Evidenced | None:
    """The corrected ``value`` of header field ``path``, evidenced in ``ocr_text``.

    Returns None when the document does not print the value (or, for amounts and
    dates, the value is not in canonical form; the caller's contract parse
    rejects that first).

    Raises:
        ValueError: ``path`` is not a correctable field.
    """
    if path not in CORRECTABLE_FIELDS:
        raise ValueError(f"{path!r} is not a correctable field")
    g = Grounder(_empty_answer(), layout_of(ocr_text))
    if path in AMOUNT_FIELDS:
        try:
            wanted = Decimal(value)
        except InvalidOperation:
            return None
        for printed in _printed_amounts(g, wanted):
            found = g.amount(path, printed)
            if found is not None and found.value == wanted:
                return found
        return None
    if path in DATE_FIELDS:
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return None
        for form in _date_forms(day):
            if form not in ocr_text:
                continue
            dated = g.when(path, form, prove_role=False)  # the reviewer states its role
            if dated is not None and dated.value == day:
                return dated
        return None
    if path == "currency":
        return g.currency(value)
    if path == "iban":
        return g.iban(value)
    if path == "supplier.vat_id":
        return g.vat_id(value, None)
    return g.text(path, value)


def _nearest_first(g: Grounder, near: Evidence | None) -> list[Line]:
    """The document's lines, those nearest the old evidence first."""
    lines = g.doc.lines
    if near is None:
        return list(lines)
    try:
        hint = g.doc.line_at(near.page, near.start).number
    except ValueError:
        return list(lines)
    return sorted(lines, key=lambda line: (abs(line.number - hint), line.number))


def _row_evidence(g: Grounder, first: Line, end: int) -> Evidence:
    """The span of a row from its first line's text to ``end``, without outer spaces."""
    page = g.doc.pages[first.page - 1]
    start = first.start + len(first.text) - len(first.text.lstrip())
    stop = end - (len(page[start:end]) - len(page[start:end].rstrip()))
    return g.evidence(Found(first.page, start, max(stop, start + 1), first, "exact"))


def _printed(g: Grounder, text: str) -> tuple[set[Decimal], set[Decimal]]:
    """Plain and percent values printed in ``text``, read with the document's mark."""
    found = numbers_in(text, g.mark, space_groups=g.space)
    return {p.value for p in found if not p.percent}, {p.value for p in found if p.percent}


def ground_row_correction(
    ocr_text: str, row: LineItem | TaxLine, near: Evidence | None
) -> Evidence | None:
    """Where the corrected ``row`` is printed: the evidence of the nearest printed row
    (to ``near``, the row's old evidence) that shows every corrected value, or None.

    A line item's row shows its quantity, unit price and line amount, its tax rate
    when the row prints a percentage at all (grounding takes an unprinted rate from
    the tax lines), and its description (normalised); a stacked row (description
    above the numbers) counts as one row. A tax line's line shows its base and
    amount and its rate as a percentage.
    """
    g = Grounder(_empty_answer(), layout_of(ocr_text))
    for line in _nearest_first(g, near):
        page = g.doc.pages[line.page - 1]
        if isinstance(row, TaxLine):
            plain, percent = _printed(g, line.text)
            if {row.base, row.amount} <= plain and row.rate in percent:
                return _row_evidence(g, line, line.end)
            continue
        read = g.row(line.number)
        ends = [line.end] + ([read.end] if read is not None and read.end != line.end else [])
        for end in ends:
            text = page[line.start : end]
            plain, percent = _printed(g, text)
            shown = {row.quantity, row.unit_price, row.line_amount} <= plain
            rated = not percent or row.tax_rate in percent
            described = normalise_text(row.description) in normalise_text(text)
            if shown and rated and described:
                return _row_evidence(g, line, end)
    return None
