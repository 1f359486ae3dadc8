"""The candidate stage: every header field's candidates of one document, located once.

What the grammar may offer for each field is read from the lines the prompt shows
(:func:`~pipeline.extraction.table.shown_layout`: a value printed only on a row the
prompt hides is none a model could copy) by the functions of
:mod:`pipeline.extraction.candidates`, :mod:`pipeline.extraction.supplier_names` and
:mod:`pipeline.extraction.invoice_number`. Each offered text is then located on the
whole layout as grounding locates its field (the boundary, the label that chooses among
occurrences, the field's proofs) and kept as a :class:`~pipeline.extraction.candidate.
Candidate` with its spans and its resolution, so the grammar
(:func:`~pipeline.extraction.answer.schema_for`) and grounding
(:func:`~pipeline.extraction.grounding.ground_in`) read one :class:`CandidateSet`, made
once per layout.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.cpu_budget import spend
from pipeline.extraction.candidate import Candidate, CandidateSet, Refusal
from pipeline.extraction.candidates import (
    currency_candidates,
    date_candidates,
    due_date_candidates,
    iban_candidates,
    invoice_dates,
    printed_due_date,
    reference_candidates,
    vat_id_candidates,
)
from pipeline.extraction.dates import date_at
from pipeline.extraction.invoice_number import MAX_CHECKED_NUMBERS, number_at
from pipeline.extraction.labels import LABELS
from pipeline.extraction.layout import Layout, amounts, per_layout
from pipeline.extraction.locate import (
    Boundary,
    Found,
    decoy_label,
    decoy_number_label,
    labelled_in,
    occurrences,
)
from pipeline.extraction.supplier_names import supplier_candidates
from pipeline.extraction.table import shown_layout
from pipeline.extraction.terms import payment_terms, term_days
from pipeline.invoice import ReasonCode

#: The most candidates of one field located and resolved here (bounded work on a page
#: that prints thousands of amounts): one past it is offered as a text and grounding
#: locates it if it is answered, as it locates free text.
MAX_RESOLVED = 64

#: Where grounding's own label list for a field has another name than the answer's key.
_LABEL_PATHS = {
    "supplier": "supplier.name",
    "number": "invoice_number",
    "net": "net_total",
    "tax": "tax_total",
    "gross": "gross_total",
}

Resolve = Callable[[str, list[Found]], Found | Refusal | None]


def not_printed(text: str) -> Refusal:
    """The refusal of a value grounding finds nowhere on the page."""
    return Refusal(
        f"{text[:60]!r} is not printed in the document",
        ReasonCode.UNGROUNDED_VALUE,
        "grounding.not_printed",
    )


class _Stage:
    """Builds one document's candidates; each text is located once per boundary."""

    def __init__(self, doc: Layout) -> None:
        self.doc = doc
        self.found: dict[tuple[str, Boundary, bool], list[Found]] = {}

    def spans(self, text: str, boundary: Boundary, *, fuzzy: bool = False) -> list[Found]:
        key = (text, boundary, fuzzy)
        if key not in self.found:
            spend()
            self.found[key] = occurrences(self.doc, text, fuzzy=fuzzy, boundary=boundary)
        return self.found[key]

    def field(
        self,
        field: str,
        texts: list[str],
        boundary: Boundary,
        resolve: Resolve,
        *,
        fuzzy: bool = False,
        decoys: Callable[[Found], str | None] | None = None,
    ) -> tuple[Candidate, ...]:
        out = []
        for i, text in enumerate(texts):
            if i >= MAX_RESOLVED:
                out.append(Candidate(f"{field}#{i}", field, text, (), None))
                continue
            spans = self.spans(text, boundary, fuzzy=fuzzy)
            features: tuple[str, ...] = ()
            if decoys is not None:
                features = tuple(
                    f"decoy:{word}@L{f.line.number}" for f in spans if (word := decoys(f))
                )
            resolved = resolve(text, list(spans))
            if isinstance(resolved, Refusal):
                features += (f"refused:{resolved.rule}",)
            out.append(Candidate(f"{field}#{i}", field, text, tuple(spans), resolved, features))
        return tuple(out)


def _labelled(doc: Layout, field: str, *, last: bool) -> Resolve:
    """The occurrence under the field's label (:func:`~pipeline.extraction.locate.
    labelled_in`), as grounding chooses among a located value's occurrences."""
    labels = LABELS.get(_LABEL_PATHS.get(field, field), ())

    def resolve(text: str, spans: list[Found]) -> Found | Refusal:
        return labelled_in(doc, spans, labels, last=last) if spans else not_printed(text)

    return resolve


def _anywhere(text: str, spans: list[Found]) -> Refusal | None:
    """The VAT id: which occurrence depends on where the answer's supplier is printed."""
    return None if spans else not_printed(text)


@per_layout
def candidate_set(doc: Layout) -> CandidateSet:
    """Every header field's candidates of ``doc``, in the order the grammar offers them
    (what :func:`~pipeline.extraction.answer.schema_for` offered as plain lists)."""
    seen_doc = shown_layout(doc)
    seen = seen_doc.text
    printed = list(amounts(seen_doc))
    dates = date_candidates(seen)
    terms = list(dict.fromkeys(t[0] for t in payment_terms(seen_doc)))
    ibans = iban_candidates(seen)
    names = [c.text for c in supplier_candidates(seen_doc)]
    vat_ids = vat_id_candidates(seen, frozenset(ibans + printed + dates))
    numbers = reference_candidates(seen_doc, frozenset(printed + dates))
    due = due_date_candidates(seen_doc, dates)
    if not printed_due_date(seen_doc, dates):
        due += terms
    issue = invoice_dates(seen_doc, dates, "issue_date") if dates else []

    stage = _Stage(doc)
    fields: dict[str, tuple[Candidate, ...]] = {}
    if names:
        fields["supplier"] = stage.field(
            "supplier", names, "word", _labelled(doc, "supplier", last=False), fuzzy=True
        )
    if vat_ids:
        fields["vat_id"] = stage.field("vat_id", vat_ids, "word", _anywhere)
    fields["number"] = _numbers(stage, numbers)
    for path, offered in (("issue_date", issue), ("due_date", due)):
        if path == "issue_date" and not offered:
            continue  # free text where the page prints no date

        def on_date(text: str, spans: list[Found], path: str = path) -> Found | Refusal | None:
            if path == "due_date" and term_days(text) is not None:
                return None  # a payment term: counted from the issue date, not located
            return date_at(doc, path, text, found=spans)

        fields[path] = stage.field(path, offered, "number", on_date, decoys=decoy_label)
    fields["currency"] = stage.field(
        "currency", currency_candidates(seen), "letters", _labelled(doc, "currency", last=True)
    )
    fields["iban"] = stage.field("iban", ibans, "word", _labelled(doc, "iban", last=False))
    for total in ("net", "tax", "gross"):
        fields[total] = stage.field(total, printed, "number", _labelled(doc, total, last=True))
    order = ("supplier", "vat_id", "number", "issue_date", "due_date", "currency", "iban")
    return CandidateSet({k: fields[k] for k in (*order, "net", "tax", "gross") if k in fields})


def _numbers(stage: _Stage, offered: list[str]) -> tuple[Candidate, ...]:
    """The invoice number's candidates: only those its proofs keep
    (:func:`~pipeline.extraction.invoice_number.number_at`: the model never picks one
    refused for sure); past :data:`~pipeline.extraction.invoice_number.
    MAX_CHECKED_NUMBERS` every one, unchecked."""
    if len(offered) > MAX_CHECKED_NUMBERS:
        return tuple(Candidate(f"number#{i}", "number", t, (), None) for i, t in enumerate(offered))

    def proven(text: str, spans: list[Found]) -> Found | Refusal:
        return number_at(stage.doc, text, spans)

    checked = stage.field("number", offered, "word", proven, decoys=decoy_number_label)
    kept = [c for c in checked if not isinstance(c.resolved, Refusal)]
    return tuple(
        Candidate(f"number#{i}", "number", c.text, c.spans, c.resolved, c.features)
        for i, c in enumerate(kept)
    )
