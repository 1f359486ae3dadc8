"""An amount to pay other than the gross total: contract v2 has no place for it.

An invoice may print that part of it is already paid (an advance, a deposit,
instalments received: "Erhaltene Anzahlungen -17808,00", "Zahlbetrag 502,63").
The result holds the gross total only, so an ERP told to pay it would pay what was
paid before. Such a page goes to review, whatever the answer says:

* a line under a prepaid label (``lexicon/amount_due.json``) printing a non-zero
  amount, or
* a line under an amount-due label printing only amounts below the gross total (what
  was paid before is no longer due; an amount to pay above the answer's gross says
  the gross is wrong, which the totals' arithmetic names).

Only amounts count (two decimals or more, no percentage): "Te betalen voor
15-01-2026" is a due date's label, not an amount. An amount-due line equal to the
gross total, and a prepaid line of 0,00, change nothing.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import cache
from importlib import resources

from pipeline.extraction.layout import Layout, Line
from pipeline.extraction.locate import fold
from pipeline.invoice import Reason, ReasonCode

RULE = "totals.amount_due_differs"


@cache
def _labels() -> tuple[tuple[str, ...], tuple[str, ...]]:
    raw = json.loads(
        resources.files("pipeline.extraction").joinpath("lexicon/amount_due.json").read_text()
    )
    return tuple(raw["prepaid_labels"]), tuple(raw["due_labels"])


def _amounts(doc: Layout, line: Line) -> list[tuple[str, Decimal]]:
    return [(p.text, p.value) for p in doc.numbers_on(line) if p.places >= 2 and not p.percent]


def amount_due_reasons(doc: Layout, gross: Decimal | None) -> list[Reason]:
    """The reason a page states an amount to pay other than ``gross``, at most one."""
    prepaid, due = _labels()
    for line in doc.lines:
        folded = fold(line.text)
        printed = _amounts(doc, line)
        if not printed:
            continue
        label = next((p for p in prepaid if p in folded), None)
        if label is not None and any(value != 0 for _, value in printed):
            text = next(t for t, value in printed if value != 0)
            return [_reason(line, f"the page prints a payment already made ({text})")]
        label = next((d for d in due if d in folded), None)
        if label is not None and gross is not None and all(v < gross for _, v in printed):
            text = printed[-1][0]
            return [_reason(line, f"the page prints an amount to pay of {text}, not the gross")]
    return []


def _reason(line: Line, what: str) -> Reason:
    return Reason(
        ReasonCode.AMOUNT_DUE_DIFFERS,
        "gross_total",
        f"{what} on line {line.number}: contract v2 holds no prepayment",
        rule=RULE,
    )
