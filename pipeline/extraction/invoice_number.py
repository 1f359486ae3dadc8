"""The invoice number's proofs: the invoice's own number, proven by its label.

An invoice number is the costliest header field to get wrong (it keys duplicate
detection and the ERP's posting), and a page prints many numbers that look like one:
an order, customer or delivery-note number, a year, a postcode, a part of a date, a
part of a number printed with spaces. The number the model names is kept only where
the page proves its role (issue 41); otherwise grounding refuses it with the rule that
failed (:data:`pipeline.invoice.rules.RULES`, ``label.invoice_number.*``).
"""

from __future__ import annotations

import re

from pipeline.extraction.candidate import Refusal
from pipeline.extraction.candidates import date_candidates, labelled_numbers, printed_references
from pipeline.extraction.label_proof import number_proof
from pipeline.extraction.labels import LABELS, NUMBER_WORDS
from pipeline.extraction.layout import Layout, amounts, per_layout
from pipeline.extraction.locate import Found, decoy_number_label, labelled_in, occurrences
from pipeline.extraction.refusal import Refuse
from pipeline.invoice import ReasonCode

#: A bare year ("2026"): never an invoice number without the invoice's own label.
_YEAR = re.compile(r"(?:19|20)\d\d")


#: What may continue a number past one space ("684 30", "2024 / 17"): a digit or a slash.
_CONTINUES = re.compile(r" [\d/-]")
#: What may open a number before one space ("INV 4186", "RE 2024-17", a series letter
#: "F 604"): capitals alone, one letter or a few.
_OPENS = re.compile(r"(?:^|\s)[A-ZÄÖÜÉÈ]{1,6} $")


def _cut_from_longer(f: Found) -> bool:
    """Whether the number at ``f`` may be a part of a longer one printed with it: a digit
    or a slash one space after it, or a word of capitals one space before it (a number
    printed with spaces, "INV 2023 10867"; the grammar offers its parts one by one)."""
    text = f.line.text
    start, end = f.start - f.line.start, f.end - f.line.start
    before = text[max(0, start - 8) : start]
    word = before.split()[-1] if before.split() else ""
    opens = _OPENS.search(before) is not None and word.casefold().strip(".:#") not in NUMBER_WORDS
    return _CONTINUES.match(text, end) is not None or opens


@per_layout
def _dated(doc: Layout) -> list[Found]:
    """Where the page prints its dates (a number inside one is a part of a date)."""
    return [
        d
        for printed in date_candidates(doc.text)
        for d in occurrences(doc, printed, fuzzy=False, boundary="number")
    ]


@per_layout
def _named(doc: Layout) -> list[str]:
    """The numbers printed after the invoice's label, amounts and dates aside."""
    return labelled_numbers(doc, frozenset(list(amounts(doc)) + date_candidates(doc.text)))


def invoice_number_at(doc: Layout, path: str, value: str | None, refuse: Refuse) -> Found | None:
    """Where ``value`` is printed as the invoice's own number, or None (refused through
    ``refuse`` with its rule id): :func:`number_at`."""
    if value is None:
        return None
    at = number_at(doc, value)
    if isinstance(at, Refusal):
        refuse(path, at.detail, at.code, rule=at.rule)
        return None
    return at


@per_layout
def _proven(doc: Layout) -> tuple[str, ...]:
    """The printed tokens another label than the invoice's proves as its number
    (:func:`~pipeline.extraction.label_proof.number_proof`) and every other proof keeps:
    where the page prints no number after the invoice's label, more than one of these
    leaves the number's role unproven (refused, never picked)."""
    others = frozenset(list(amounts(doc)) + date_candidates(doc.text))
    return tuple(
        token
        for token in printed_references(doc, others)
        if any(number_proof(doc, f) for f in occurrences(doc, token, fuzzy=False))
        and not isinstance(_number_at(doc, token, None), Refusal)
    )


def number_at(doc: Layout, value: str, found: list[Found] | None = None) -> Found | Refusal:
    """Where ``value`` is printed as the invoice's own number, or why it is refused.

    Never one printed only as another document's (an order, the customer, a delivery
    note: see :func:`~pipeline.extraction.locate.decoy_number_label`), never words
    without a digit (the customer's name, "Bianchi S.r.l."), only the number printed
    after the invoice's label where there is one
    (:func:`~pipeline.extraction.candidates.labelled_numbers`), else one another label
    proves (:func:`~pipeline.extraction.label_proof.number_proof`), never a bare year,
    never a part of a date and never a part of a number printed with spaces
    (``ambiguous_role``), and where no number follows the invoice's label, never one of
    two or more that another label proves (``label.invoice_number.rival``: a page that
    proves two numbers proves neither). ``found``: the value's occurrences where the
    caller has them (:func:`~pipeline.extraction.locate.occurrences`, word boundary)."""
    at = _number_at(doc, value, found)
    if isinstance(at, Refusal) or _named(doc):
        return at
    rivals = [t for t in _proven(doc) if t != value.strip()]
    if rivals:
        shown = ", ".join(repr(r) for r in rivals[:3])
        return Refusal(
            f"{value[:60]!r} is one of several numbers a label proves ({shown} too)",
            ReasonCode.AMBIGUOUS_ROLE,
            "label.invoice_number.rival",
        )
    return at


def _number_at(doc: Layout, value: str, found: list[Found] | None) -> Found | Refusal:
    """:func:`number_at` without its rivals."""
    if not any(ch.isdigit() for ch in value):
        return Refusal(
            f"{value[:60]!r} holds no digit: no document number",
            ReasonCode.UNGROUNDED_VALUE,
            "label.invoice_number.no_digit",
        )
    if found is None:
        found = occurrences(doc, value, fuzzy=False)
    if not found:
        return Refusal(
            f"{value[:60]!r} is not printed in the document",
            ReasonCode.UNGROUNDED_VALUE,
            "grounding.not_printed",
        )
    decoys = [decoy_number_label(f) for f in found]
    plain = [f for f, decoy in zip(found, decoys, strict=True) if decoy is None]
    if not plain:
        return Refusal(
            f"{value[:60]!r} is printed as another number ({decoys[0]!r} before it)",
            ReasonCode.UNGROUNDED_VALUE,
            "label.invoice_number.other_document",
        )
    dated = _dated(doc)
    plain = [
        f
        for f in plain
        if not any(d.page == f.page and d.start <= f.start and f.end <= d.end for d in dated)
    ]
    if not plain:  # the "8" of "8 de noviembre de 2024"
        return Refusal(
            f"{value[:60]!r} is part of a date",
            ReasonCode.AMBIGUOUS_ROLE,
            "label.invoice_number.date_part",
        )
    named = _named(doc)
    if named and value.strip() not in named:
        shown = ", ".join(repr(n) for n in named[:3])
        return Refusal(
            f"{value[:60]!r} is not what the invoice's label prints ({shown})",
            ReasonCode.UNGROUNDED_VALUE,
            "label.invoice_number.not_labelled_value",
        )
    if not named:
        plain = [f for f in plain if number_proof(doc, f) is not None]
        if not plain or _YEAR.fullmatch(value.strip()):
            year_or_no_label = (
                "label.invoice_number.bare_year"
                if _YEAR.fullmatch(value.strip())
                else "label.invoice_number.no_label"
            )
            return Refusal(
                f"{value[:60]!r} is printed under no invoice-number label",
                ReasonCode.AMBIGUOUS_ROLE,
                year_or_no_label,
            )
    whole = [f for f in plain if not _cut_from_longer(f)]
    if not whole:
        return Refusal(
            f"{value[:60]!r} may be part of a longer number printed with it",
            ReasonCode.AMBIGUOUS_ROLE,
            "label.invoice_number.part_of_longer",
        )
    return labelled_in(doc, whole, LABELS.get("invoice_number", ()), last=False)


#: The most invoice-number candidates checked one by one against grounding's proofs by
#: the candidate stage (:mod:`pipeline.extraction.candidate_set`; each check reads the
#: page's dates and labels once: bounded work on a long page). Past it all are offered.
MAX_CHECKED_NUMBERS = 64
