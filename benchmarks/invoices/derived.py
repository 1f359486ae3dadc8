"""Documents derived from a generated invoice, as a load run plants them.

:mod:`benchmarks.load.plants` plants them in a run; the fake provider answers each
(:func:`derived_answers`), so it needs no run's plan:

* :func:`amended`: the same supplier and number, the issue date printed 3 days later;
* :func:`near_duplicate`: the number printed otherwise with the same normal form
  (:func:`pipeline.jobs.near_duplicates.normalise_number`);
* :func:`credit_note`: a CII credit note of the whole invoice naming its number.

Each text document comes with the fake provider's answer: the invoice's own with the
changed field (the text's lines are unchanged, so the answer's line numbers hold).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from benchmarks.invoices.einvoice import cii_xml
from benchmarks.invoices.generator import GeneratedInvoice
from benchmarks.invoices.locales import fmt_date
from pipeline.extraction.extractor import answer_for
from pipeline.jobs.near_duplicates import normalise_number


def _answer(inv: GeneratedInvoice) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(answer_for(inv.candidate, inv.ocr_text))
    return data


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def amended(inv: GeneratedInvoice) -> tuple[str, str] | None:
    """(text, answer) of ``inv`` with its issue date printed 3 days later; None if the
    date's print form is not one the locale writes."""
    issue = inv.candidate.issue_date
    if issue is None or issue.evidence.page != 1:
        return None
    ev = issue.evidence
    shown = inv.ocr_text[ev.start : ev.end]
    answer = _answer(inv)
    if shown.strip() != answer.get("issue_date"):
        return None
    for style in range(6):
        if fmt_date(issue.value, inv.language, style) == shown.strip():
            later = fmt_date(issue.value + timedelta(days=3), inv.language, style)
            answer["issue_date"] = later
            return _splice(inv.ocr_text, ev.start, ev.end, later), json.dumps(answer)
    return None


def reformatted_number(number: str) -> str | None:
    """``number`` printed otherwise with the same normal form and another exact one."""
    for other in ("0" + number, number.replace("-", " "), number.replace("/", " ")):
        squashed = "".join(other.split()).upper()
        if squashed != "".join(number.split()).upper() and normalise_number(
            other
        ) == normalise_number(number):
            return other
    return None


def near_duplicate(inv: GeneratedInvoice) -> tuple[str, str] | None:
    """(text, answer) of ``inv`` with its number reformatted; None if it cannot be."""
    number = inv.candidate.invoice_number
    if number is None or number.evidence.page != 1:
        return None
    ev = number.evidence
    shown = inv.ocr_text[ev.start : ev.end]
    answer = _answer(inv)
    other = reformatted_number(shown.strip())
    if other is None or shown.strip() != answer.get("number"):
        return None
    answer["number"] = other
    return _splice(inv.ocr_text, ev.start, ev.end, other), json.dumps(answer)


def credit_note_number(number: str) -> str:
    """The credit note's own number (another normal form than the invoice's)."""
    return f"{number}-CR"


def credit_note(inv: GeneratedInvoice) -> bytes | None:
    """A CII credit note of all of ``inv`` naming its number; None without a number."""
    truth = inv.truth
    if truth.invoice_number is None:
        return None
    own = truth.invoice_number.model_copy(
        update={"value": credit_note_number(truth.invoice_number.value)}
    )
    try:
        return cii_xml(
            truth.model_copy(update={"invoice_number": own}), credits=truth.invoice_number.value
        )
    except ValueError:
        return None


def derived_answers(corpus: list[GeneratedInvoice]) -> list[tuple[str, str]]:
    """(OCR text, answer) of every amended and near-duplicate document of ``corpus``."""
    out: list[tuple[str, str]] = []
    for inv in corpus:
        for made in (amended(inv), near_duplicate(inv)):
            if made is not None:
                out.append(made)
    return out
