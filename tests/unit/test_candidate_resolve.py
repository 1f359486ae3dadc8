"""Candidates carry their spans; grounding resolves an offered text to its candidate's span.

The candidate stage (:func:`pipeline.extraction.candidate_set.candidate_set`) locates each
text the grammar offers once, with the field's proofs; grounding takes the candidate's
span or refusal for an answered text that is one of its field's candidates and locates
only free text (:mod:`pipeline.extraction.grounding`).
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.extraction.answer import Answer, schema_for
from pipeline.extraction.candidate import Candidate, CandidateSet, Refusal
from pipeline.extraction.candidate_set import candidate_set
from pipeline.extraction.grounding import Grounder, ground_in
from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import Found
from pipeline.invoice import ReasonCode

_EMPTY = dict.fromkeys(list(Answer.model_fields)[:10])

# "2024-17" is printed twice: first as the order's number, then as the invoice's.
_TWICE = "\n".join(
    [
        "Nordwind Technik GmbH",
        "Bestellnummer: 2024-17",
        "Rechnungsnummer: 2024-17",
        "Rechnungsdatum: 05.03.2024",
        "Lieferdatum: 01.03.2024",
        "Nettobetrag: 100,00 EUR",
        "MwSt 19%: 19,00 EUR",
        "Gesamtbetrag: 119,00 EUR",
        "Zwischensumme 119,00",
    ]
)


def _answer(**values: str) -> Answer:
    return Answer.model_validate({**_EMPTY, **values})


def test_a_candidate_keeps_every_span_and_the_proven_one() -> None:
    doc = Layout.read(_TWICE)
    number = candidate_set(doc).offered("number", "2024-17")
    assert number is not None
    assert number.id == "number#0"
    assert [f.line.number for f in number.spans] == [2, 3]
    assert isinstance(number.resolved, Found)
    assert number.resolved.line.number == 3  # the invoice's label, not the order's
    assert any(feature.startswith("decoy:") and "@L2" in feature for feature in number.features)


def test_an_offered_number_resolves_to_its_proven_span() -> None:
    doc = Layout.read(_TWICE)
    number = candidate_set(doc).offered("number", "2024-17")
    assert number is not None and isinstance(number.resolved, Found)
    got = ground_in(_answer(number="2024-17"), doc).extraction.invoice_number
    assert got is not None
    assert (got.evidence.line, got.evidence.start, got.evidence.end) == (
        number.resolved.line.number,
        number.resolved.start,
        number.resolved.end,
    )


def test_grounding_takes_the_candidates_span_without_searching() -> None:
    """A candidate set whose gross resolves to the total's first occurrence (locating
    would choose the last, "Zwischensumme 119,00"): grounding takes the set's span."""
    doc = Layout.read(_TWICE)
    offers = candidate_set(doc)
    gross = offers.offered("gross", "119,00")
    assert gross is not None and isinstance(gross.resolved, Found)
    assert gross.resolved.line.number == 8  # under "Gesamtbetrag", as grounding chooses
    first = gross.spans[0]
    assert first.line.number == 8
    last = gross.spans[-1]
    assert last.line.number == 9
    moved = replace(gross, resolved=last)
    fields = {**offers.fields, "gross": (moved,)}
    g = Grounder(_answer(gross="119,00"), doc, CandidateSet(fields))
    got = g.amount("gross_total", "119,00", "gross")
    assert got is not None
    assert (got.evidence.line, got.evidence.start) == (9, last.start)
    # free text (no candidate) is still located, and chosen by its label
    located = Grounder(_answer(gross="119,00"), doc).amount("gross_total", "119,00")
    assert located is not None and located.evidence.line == 8


def test_a_refused_candidate_refuses_with_its_rule_and_is_not_located_again() -> None:
    doc = Layout.read(_TWICE)
    refusal = Refusal("made up", ReasonCode.UNGROUNDED_VALUE, "label.date.other_document")
    issue = candidate_set(doc).offered("issue_date", "05.03.2024")
    assert issue is not None and isinstance(issue.resolved, Found)
    refused = Candidate("issue_date#0", "issue_date", "05.03.2024", issue.spans, refusal)
    fields = {**candidate_set(doc).fields, "issue_date": (refused,)}
    g = Grounder(_answer(issue_date="05.03.2024"), doc, CandidateSet(fields))
    assert g.when("issue_date", "05.03.2024") is None
    assert [(r.field, r.detail, r.rule) for r in g.reasons] == [
        ("issue_date", "made up", "label.date.other_document")
    ]


def test_a_delivery_date_offered_for_nothing_else_carries_its_refusal() -> None:
    doc = Layout.read("Acme GmbH\nLieferdatum: 01.03.2024\nSumme: 10,00 EUR")
    issue = candidate_set(doc).offered("issue_date", "01.03.2024")
    assert issue is not None
    assert isinstance(issue.resolved, Refusal)
    assert issue.resolved.rule == "label.date.other_document"
    reasons = ground_in(_answer(issue_date="01.03.2024"), doc).reasons
    assert [(r.field, r.rule) for r in reasons if r.field == "issue_date"] == [
        ("issue_date", "label.date.other_document")
    ]


def test_the_grammar_offers_the_candidates_texts() -> None:
    doc = Layout.read(_TWICE)
    offers = candidate_set(doc)
    schema = schema_for(doc)["properties"]
    for key, candidates in offers.fields.items():
        texts = [c.text for c in candidates]
        enum = schema[key]["anyOf"][0]["enum"] if texts else None
        assert enum == (texts or None), key
