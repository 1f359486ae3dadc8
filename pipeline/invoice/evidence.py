"""Evidence: where a contract value is printed, and the evidenced value types.

Every financial value of a result carries an :class:`Evidence` reference (page,
start, end, quote) into the document's text, which validation resolves against the
text the job holds; under contract v2 the system writes it (grounding), adding
``line`` and ``match``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from pipeline.invoice.wire_types import (
    Amount,
    ContractModel,
    CurrencyCode,
    IbanStr,
    IsoDate,
    NonEmptyStr,
    Offset,
    PageNumber,
)

#: How grounding found a value in the OCR text (contract v2; None under contract v1,
#: whose evidence the model gave): ``exact`` as copied, ``normalised`` after
#: whitespace/case/compatibility folding, ``fuzzy`` by a bounded approximate match
#: (free text only: names, descriptions), ``symbol`` a currency read from its sign,
#: ``arithmetic`` a total put right after the model copied another total into its
#: field (``pipeline/extraction/totals.py``).
#: How grounding found a value: ``term`` is a due date counted from a payment term in
#: days ("within 30 days"), its evidence the term as printed. ``xml``: read from an
#: e-invoice's XML without a model; ``quote`` is the XML path, ``start``/``end`` 0.
MatchKind = Literal["exact", "normalised", "fuzzy", "symbol", "arithmetic", "term", "xml"]
#: Evidence keys only the system writes; the v1 grammar never offers them to a model.
SYSTEM_EVIDENCE_KEYS = ("line", "match")


class Evidence(ContractModel):
    """Where a value is printed: ``quote`` must equal ``page_text[start:end]``.

    The schema cannot check that; :mod:`pipeline.validation.decide` does, against the
    OCR text the job actually holds, because a model can fabricate spans too.
    Under contract v2 the system derives every field here (:mod:`pipeline.grounding`)
    and adds ``line`` (1-based, counted over the whole document as the prompt
    numbers it) and ``match``.
    """

    page: PageNumber
    start: Offset
    end: Offset
    quote: str
    line: int | None = None
    match: MatchKind | None = None

    @model_serializer(mode="wrap")
    def _without_unset_system_keys(self, handler: SerializerFunctionWrapHandler) -> Any:
        """v1 evidence (no line, no match) dumps exactly as before contract v2 existed."""
        data = handler(self)
        if isinstance(data, dict):
            for key in SYSTEM_EVIDENCE_KEYS:
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class EvidencedText(ContractModel):
    value: NonEmptyStr
    evidence: Evidence


class EvidencedAmount(ContractModel):
    value: Amount
    evidence: Evidence


class EvidencedDate(ContractModel):
    value: IsoDate
    evidence: Evidence


class EvidencedCurrency(ContractModel):
    value: CurrencyCode
    evidence: Evidence


class EvidencedIban(ContractModel):
    """IBAN in electronic form: upper case, no spaces (the quote keeps the print form)."""

    value: IbanStr
    evidence: Evidence


#: Any one of the contract's evidenced header values.
Evidenced = EvidencedAmount | EvidencedCurrency | EvidencedDate | EvidencedIban | EvidencedText
