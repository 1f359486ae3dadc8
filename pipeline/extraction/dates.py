"""The invoice's dates on the page: the issue date and the due date, each at its label.

A date is grounded where it is printed under its own role's label (or a structure that
admits one reading: a letter's date line, the only unclaimed date; a payment term in
days counted from the issue date), never where it is printed only as another date
(delivery, order, service) or as the invoice's other date, and an ambiguous numeric
or month-name date is read in the supplier's country or refused
(:mod:`pipeline.extraction.label_proof`, :mod:`pipeline.extraction.terms`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

from pipeline.extraction.candidate import CandidateSet, Refusal
from pipeline.extraction.candidates import date_candidates
from pipeline.extraction.label_proof import claimed_date, date_proof, due_label_near
from pipeline.extraction.labels import LABELS
from pipeline.extraction.layout import Layout, per_layout
from pipeline.extraction.locate import (
    Found,
    decoy_label,
    fold,
    label_before,
    labelled_in,
    occurrences,
    other_date_label,
)
from pipeline.extraction.refusal import Refuse
from pipeline.extraction.terms import PAYMENT_WORDS, payment_terms, term_days
from pipeline.invoice import Evidence, EvidencedDate, ReasonCode, date_readings


class DateReader:
    """Grounds one answer's dates in one document; refusals go to ``refuse``."""

    def __init__(
        self,
        doc: Layout,
        ids: tuple[str | None, str | None],
        refuse: Refuse,
        evidence: Callable[[Found], Evidence],
        candidates: CandidateSet | None = None,
    ) -> None:
        self.doc = doc
        #: The document's candidates: an offered date resolves to its span or refusal.
        self.candidates = candidates
        #: The supplier's IBAN and VAT id as the answer gives them (their countries
        #: settle a month name that means different months in different languages).
        self.ids = ids
        self.refuse = refuse
        self.evidence = evidence

    def _refuse(
        self, path: str, detail: str, code: ReasonCode = ReasonCode.UNGROUNDED_VALUE, *, rule: str
    ) -> None:
        self.refuse(path, detail, code, rule=rule)

    def text_at(self, f: Found) -> str:
        return self.doc.pages[f.page - 1][f.start : f.end]

    def when(
        self, path: str, value: str | None, *, prove_role: bool = True
    ) -> EvidencedDate | None:
        """A date, never one printed only as another date (delivery, order, service) or
        only as the invoice's other date (the issue date copied as the due date): the
        candidate's resolution where ``value`` is one the grammar offered for ``path``
        (:mod:`pipeline.extraction.candidate`), else :func:`date_at`."""
        if value is None:
            return None
        offered = self.candidates.offered(path, value) if prove_role and self.candidates else None
        at = offered.resolved if offered is not None else None
        if at is None:
            at = date_at(self.doc, path, value, prove_role=prove_role)
        if isinstance(at, Refusal):
            self._refuse(path, at.detail, at.code, rule=at.rule)
            return None
        f = at
        readings = sorted(date_readings(self.text_at(f)))
        if not readings:
            self._refuse(
                path, f"{value!r} does not read as a date", rule="grounding.date_unreadable"
            )
            return None
        chosen = self._in_order(readings, self.text_at(f))
        if chosen is None:
            shown = ", ".join(str(d) for d in readings)
            self._refuse(path, f"{value!r} may mean {shown}", rule="grounding.date_ambiguous")
            return None
        return EvidencedDate(value=chosen, evidence=self.evidence(f))

    def due(self, value: str | None, issue: EvidencedDate | None) -> EvidencedDate | None:
        """The due date: a date under a due label (:meth:`when`), or a payment term in days
        counted from the issue date (:mod:`pipeline.extraction.terms`, evidence
        ``match: "term"``) where the page states that one term and prints no due date."""
        if value is None:
            self.no_due_date()
            return None
        days = term_days(value)
        if days is None:
            return self.when("due_date", value)
        stated = [t for t in payment_terms(self.doc) if t[0] == value.strip()]
        if not stated:
            self._refuse(
                "due_date",
                f"{value!r} is no payment term the page states alone",
                ReasonCode.AMBIGUOUS_ROLE,
                rule="terms.not_stated_alone",
            )
            return None
        if self.labelled_due_date() is not None:
            self._refuse(
                "due_date",
                f"the page prints a due date ({self.labelled_due_date()!r}); {value!r} is not it",
                ReasonCode.AMBIGUOUS_ROLE,
                rule="terms.due_date_printed",
            )
            return None
        if issue is None:
            self._refuse(
                "due_date",
                f"{value!r} counts from an issue date that is not grounded",
                rule="terms.issue_date_ungrounded",
            )
            return None
        printed, _, page, at = stated[0]
        f = Found(page, at, at + len(printed), self.doc.line_at(page, at), "term")
        return EvidencedDate(value=issue.value + timedelta(days=days), evidence=self.evidence(f))

    def labelled_due_date(self) -> str | None:
        """A date the page prints under a due label, if any."""
        for printed in date_candidates(self.doc.text):
            for f in occurrences(self.doc, printed, fuzzy=False, boundary="number"):
                if date_proof(self.doc, f, "due_date") is not None:
                    return printed
        return None

    def no_due_date(self) -> None:
        """An answer without a due date is taken only where the page prints none under a
        due label (beside it, or as the due date's proof reads it), none in a payment
        sentence and states no term: a due date left out would reach the ERP as "no due
        date" unchecked."""
        printed = next(
            (
                d
                for d in date_candidates(self.doc.text)
                for f in occurrences(self.doc, d, fuzzy=False, boundary="number")
                if due_label_near(self.doc, f) or date_proof(self.doc, f, "due_date")
            ),
            None,
        )
        if printed is not None:
            self._refuse(
                "due_date",
                f"the page prints {printed!r} under a due label; the answer has none",
                ReasonCode.MISSING_FIELD,
                rule="label.due_date.left_out",
            )
            return
        sentence = self._payment_sentence_date()
        if sentence is not None:
            self._refuse(
                "due_date",
                f"the page prints {sentence!r} in a payment sentence; the answer has none",
                ReasonCode.MISSING_FIELD,
                rule="label.due_date.payment_sentence",
            )
            return
        terms = payment_terms(self.doc)
        if terms:
            self._refuse(
                "due_date",
                f"the page states a payment term ({terms[0][0]!r}); the answer has no due date",
                ReasonCode.MISSING_FIELD,
                rule="terms.left_out",
            )

    def _payment_sentence_date(self) -> str | None:
        """A date printed on a line that names a payment (a payment word of
        :data:`~pipeline.extraction.terms.PAYMENT_WORDS`: "Venligst betal senest
        25.08.2023", whose words no due label lists), under no other date's label and not
        proven as the issue date: a due date in words the due proof may not read, so an
        answer without one is no safe answer (fuzz seeds 50590, 50856, 51828)."""
        for printed in date_candidates(self.doc.text):
            for f in occurrences(self.doc, printed, fuzzy=False, boundary="number"):
                if not any(word in fold(f.line.text) for word in PAYMENT_WORDS):
                    continue
                if decoy_label(f) is None and date_proof(self.doc, f, "issue_date") is None:
                    return printed
        return None

    def _in_order(self, readings: list[date], printed_text: str) -> date | None:
        """An ambiguous numeric date (03/04/2024): month first only where another numeric
        date of the document can only be read month first (04/25/2024); else day first.
        A month name that means different months in different languages ("listopada")
        is read in the languages of the supplier's country (its IBAN's, else its VAT
        id's); where that does not settle it, None: refused rather than guessed."""
        if len(readings) == 1:
            return readings[0]
        for country in self._supplier_countries():
            local = date_readings(printed_text, territory=country)
            if len(local) == 1 and local <= set(readings):
                return local.pop()
        month_first = False
        for m in re.finditer(r"(\d{1,2})[./-](\d{1,2})[./-]\d{4}", self.doc.text):
            a, b = int(m.group(1)), int(m.group(2))
            if a > 12 >= b:
                break
            if b > 12 >= a:
                month_first = True
                break
        printed = re.search(r"(\d{1,2})[./-](\d{1,2})[./-]", printed_text)
        if printed is None:
            return None
        first, second = int(printed.group(1)), int(printed.group(2))
        day, month = (second, first) if month_first else (first, second)
        for d in readings:
            if d.day == day and d.month == month:
                return d
        return None

    def _supplier_countries(self) -> list[str]:
        """Country codes the supplier's IBAN and VAT id print, in that order."""
        out: list[str] = []
        for value in self.ids:
            prefix = (value or "").strip()[:2].upper()
            if len(prefix) == 2 and prefix.isalpha() and prefix.isascii():
                out.append("GR" if prefix == "EL" else prefix)
        return list(dict.fromkeys(out))


def date_at(
    doc: Layout,
    path: str,
    value: str,
    *,
    prove_role: bool = True,
    found: list[Found] | None = None,
) -> Found | Refusal:
    """Where ``value`` is printed as the date ``path`` (issue_date or due_date), or why it
    is refused: never where every occurrence has a delivery, order or service label
    before it, or only the invoice's other date's label; with ``prove_role``, only under
    its own role's label (:func:`~pipeline.extraction.label_proof.date_proof`) or as the
    only unclaimed date (the issue date). ``found``: the value's occurrences where the
    caller has them (:func:`~pipeline.extraction.locate.occurrences`, number boundary)."""
    if found is None:
        found = occurrences(doc, value, fuzzy=False, boundary="number")
    plain = [f for f in found if decoy_label(f) is None]
    if not found:
        return Refusal(
            f"{value[:60]!r} is not printed in the document",
            ReasonCode.UNGROUNDED_VALUE,
            "grounding.not_printed",
        )
    if not plain:
        decoy = decoy_label(found[0])
        return Refusal(
            f"{value!r} is printed as another date ({decoy!r} before it)",
            ReasonCode.UNGROUNDED_VALUE,
            "label.date.other_document",
        )
    own = [f for f in plain if not other_date_label(path, f)]
    if not own:
        label = label_before(plain[0]).strip()
        return Refusal(
            f"{value!r} is printed as the invoice's other date ({label!r})",
            ReasonCode.UNGROUNDED_VALUE,
            "label.date.other_role",
        )
    proven = [f for f in own if not prove_role or date_proof(doc, f, path) is not None]
    if not proven and path == "issue_date" and _only_date(doc, value):
        proven = own
    if not proven:
        role = "due-date" if path == "due_date" else "issue-date"
        no_label = "label.due_date.no_label" if path == "due_date" else "label.issue_date.no_label"
        return Refusal(
            f"{value!r} is printed under no {role} label", ReasonCode.AMBIGUOUS_ROLE, no_label
        )
    return labelled_in(doc, proven, LABELS.get(path, ()), last=False)


def _only_date(doc: Layout, value: str) -> bool:
    """Whether ``value`` reads as the only date the document prints under no label of a
    due, delivery, order or service date: a structure that admits one issue date only."""
    mine = date_readings(value)
    return bool(mine) and _unclaimed(doc) == set(mine)


@per_layout
def _unclaimed(doc: Layout) -> frozenset[date]:
    """What the dates the document prints under no due, delivery, order or service label
    read as (once per layout: every date candidate is checked against it)."""
    unclaimed: set[date] = set()
    for printed in date_candidates(doc.text):
        for f in occurrences(doc, printed, fuzzy=False, boundary="number"):
            if not claimed_date(doc, f):
                unclaimed |= date_readings(printed)
    return frozenset(unclaimed)
