"""Date rule: issue and due dates plausible against ``today`` and the payment term.

Also the reading of printed dates in every common form, which the evidence rule
uses to check that a date span shows the extracted date.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, timedelta

from pipeline.extraction import Extraction
from pipeline.validation_policy import DEFAULT_POLICY, Reason, ReasonCode, ValidationPolicy
from pipeline.validation_text import normalise_text

_MONTHS: Mapping[str, int] = {
    name: number
    for number, names in enumerate(
        [
            "january jan januar janvier janv",
            "february feb februar février fevrier févr fevr",
            "march mar märz maerz mär mars",
            "april apr avril avr",
            "may mai",
            "june jun juni juin",
            "july jul juli juillet juil",
            "august aug août aout",
            "september sep sept septembre",
            "october oct oktober okt octobre",
            "november nov novembre",
            "december dec dezember dez décembre decembre déc",
        ],
        start=1,
    )
    for name in names.split()
}
_ISO_DATE_RE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_NUMERIC_DATE_RE = re.compile(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})")
_DAY_MONTH_RE = re.compile(r"(\d{1,2})\.?\s+([^\W\d_]+)\.?\s+(\d{4})")
_MONTH_DAY_RE = re.compile(r"([^\W\d_]+)\.?\s+(\d{1,2}),?\s+(\d{4})")


def date_readings(text: str) -> set[date]:
    """Every date a printed date in ``text`` can mean (ISO, D.M.Y, D/M/Y or M/D/Y, month names
    in English, German and French)."""
    norm = normalise_text(text)
    triples: list[tuple[int, int, int]] = []  # (year, month, day)
    for y, m, d in _ISO_DATE_RE.findall(norm):
        triples.append((int(y), int(m), int(d)))
    for a, b, y in _NUMERIC_DATE_RE.findall(norm):
        triples += [(int(y), int(b), int(a)), (int(y), int(a), int(b))]
    for d, name, y in _DAY_MONTH_RE.findall(norm):
        if (month := _MONTHS.get(name.casefold())) is not None:
            triples.append((int(y), month, int(d)))
    for name, d, y in _MONTH_DAY_RE.findall(norm):
        if (month := _MONTHS.get(name.casefold())) is not None:
            triples.append((int(y), month, int(d)))
    out = set()
    for y, m, d in triples:
        try:
            out.add(date(y, m, d))
        except ValueError:
            continue
    return out


def check_dates(
    extraction: Extraction, today: date, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """Issue date within [today - max age, today + max future]; due date within the term."""
    reasons = []
    issue = extraction.issue_date.value if extraction.issue_date else None
    due = extraction.due_date.value if extraction.due_date else None
    if issue is not None:
        if issue > today + timedelta(days=policy.max_future_days):
            reasons.append(
                Reason(ReasonCode.DATE_IMPLAUSIBLE, "issue_date", f"{issue} is after {today}")
            )
        elif issue < today - timedelta(days=policy.max_invoice_age_days):
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "issue_date",
                    f"{issue} is more than {policy.max_invoice_age_days} days before {today}",
                )
            )
    if issue is not None and due is not None:
        if due < issue:
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE, "due_date", f"{due} is before issue date {issue}"
                )
            )
        elif (due - issue).days > policy.max_payment_term_days:
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "due_date",
                    f"payment term {(due - issue).days} days > {policy.max_payment_term_days}",
                )
            )
    return reasons
