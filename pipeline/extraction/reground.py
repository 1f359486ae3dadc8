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
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation

from pipeline.extraction.answer import Answer
from pipeline.extraction.grounding import Grounder
from pipeline.extraction.numbers import numbers_in
from pipeline.validation import (
    SCALAR_FIELDS,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
)

Evidenced = EvidencedAmount | EvidencedCurrency | EvidencedDate | EvidencedIban | EvidencedText

AMOUNT_FIELDS = ("net_total", "tax_total", "gross_total")
DATE_FIELDS = ("issue_date", "due_date")
#: The fields a reviewer may correct: every header value of the contract.
CORRECTABLE_FIELDS = SCALAR_FIELDS


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
    g = Grounder(_empty_answer(), ocr_text)
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
            dated = g.when(path, form)
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
