"""A candidate: one value the grammar offers for one header field, located once.

The candidate stage (:func:`pipeline.extraction.candidate_set.candidate_set`) reads what
the page prints for each field once per document and keeps, with each printed text the
grammar offers, where it is printed and what the field's proofs made of it: the span
grounding takes (the occurrence under the field's label, the one a label proves) or the
refusal (a decoy label before every occurrence, a part of a date, no role label). The
prompt offers the candidates' printed texts; grounding resolves an answered text that is
one of its field's candidates to that span or refusal, without searching the page again
or applying the same decoy rules a second time (:mod:`pipeline.extraction.grounding`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.extraction.locate import Found
from pipeline.invoice import ReasonCode


@dataclass(frozen=True)
class Refusal:
    """Why grounding refuses a value for its field: the detail, the reason code and the
    id of the rule that refused it (:data:`pipeline.invoice.rules.RULES`)."""

    detail: str
    code: ReasonCode
    rule: str


@dataclass(frozen=True)
class Candidate:
    """One printed text offered for one field.

    ``id`` is the field and the candidate's ordinal among the field's offers
    (``"issue_date#1"``), stable for one text. ``spans`` are every place the text is
    printed as the field is located (exact, else normalised; the boundary the field's
    kind takes), in page order. ``resolved`` is what grounding keeps: the span the
    field's proofs choose, or the :class:`Refusal`; None where the choice depends on the
    rest of the answer (the VAT id: the occurrence nearest the supplier's name).
    ``features`` name what the proofs saw, per span where they are read per span
    (``"decoy:lieferdatum@L7"``: a decoy label before the occurrence on line 7)."""

    id: str
    field: str
    text: str
    spans: tuple[Found, ...]
    resolved: Found | Refusal | None
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class CandidateSet:
    """Every field's candidates of one document, keyed by the answer's field name
    (``supplier``, ``vat_id``, ``number``, ``issue_date``, ``due_date``, ``currency``,
    ``iban``, ``net``, ``tax``, ``gross``), each in the order the grammar offers them.

    A field that is absent offers free text (no candidate set: grounding locates the
    answered text). A field present with no candidates offers only null."""

    fields: Mapping[str, tuple[Candidate, ...]]

    def texts(self, field: str) -> list[str] | None:
        """The printed texts the grammar offers for ``field``, or None for free text."""
        offered = self.fields.get(field)
        return None if offered is None else [c.text for c in offered]

    def offered(self, field: str, text: str | None) -> Candidate | None:
        """The candidate of ``field`` whose printed text is ``text`` exactly, if any."""
        if text is None:
            return None
        return next((c for c in self.fields.get(field, ()) if c.text == text), None)
