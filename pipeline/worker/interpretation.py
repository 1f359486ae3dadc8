"""What one raw answer means: grounded by extraction, then checked by validation.

Extraction and validation are siblings above the invoice model and know nothing of
each other; the worker composes them. Every caller that turns an answer into a
result (the attempt, ``fenceline eval``, the layout fuzzer, the demo) goes through
:func:`interpret`, so what a job stores and what a measurement scores cannot drift
apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from pipeline.extraction import (
    CONTRACT_V1,
    CONTRACT_V2,
    DEFAULT_CONTRACT,
    DEFAULT_LIMITS,
    Change,
    DocumentLimits,
    read_answer,
    read_einvoice,
)
from pipeline.invoice import (
    CONTRACT_V3,
    SCHEMA_V3,
    Extraction,
    TenantMasterData,
    uses_v3,
    within_v1,
)
from pipeline.validation import (
    DEFAULT_POLICY,
    Decision,
    ValidationPolicy,
    ValidationReport,
    ValueProof,
    contract_version_reasons,
    validate,
)
from pipeline.worker.ocr_proof import OcrConfidences, ocr_reasons


@dataclass(frozen=True)
class Interpretation:
    """A parsed, grounded and validated answer."""

    extraction: Extraction
    report: ValidationReport
    contract: str
    #: The values grounding changed from the answer, each with its rule id (v2 only).
    changes: tuple[Change, ...] = ()
    #: The e-invoice reader that read it (``cii-xml/1``, ``ubl-xml/1``); None: a model's answer.
    reader: str | None = None

    def result(self) -> dict[str, Any]:
        """The JSON the job stores as its result."""
        return self.extraction.model_dump(mode="json")


def interpret(
    answer: str,
    ocr_text: str,
    master_data: TenantMasterData,
    *,
    today: date,
    policy: ValidationPolicy = DEFAULT_POLICY,
    contract: str = DEFAULT_CONTRACT,
    limits: DocumentLimits | None = DEFAULT_LIMITS,
    read_by_ocr: bool = False,
    ocr: OcrConfidences | None = None,
) -> Interpretation:
    """Parse, ground and validate one raw answer.

    Grounding's refusals (``ungrounded_value``) come first in the report's
    reasons; the decision is SUCCEEDED only when neither grounding nor any
    validation rule found a reason. ``limits`` as for
    :func:`~pipeline.extraction.prepare_call`. ``read_by_ocr``: the text came from
    OCR, whose misread characters grounding cannot see (a lost accent, a 5 read as
    an S is printed in the text it grounds in): each value OCR read must be proven
    by the confidence of its words in ``ocr`` (:mod:`pipeline.worker.ocr_proof`);
    one that is not goes to review with ``ocr_unverified`` naming its field, and
    without ``ocr`` the whole document does.

    Raises:
        MalformedOutput: the answer is not the contract.
        DocumentOverLimit: the document is over one of ``limits``.
        ExtractionBudgetExceeded: reading the answer spent ``limits.cpu_seconds``.
    """
    grounding = read_answer(answer, ocr_text, contract=contract, limits=limits)
    checked = validate(grounding.extraction, ocr_text, master_data, today=today, policy=policy)
    if contract == CONTRACT_V1:
        return Interpretation(grounding.extraction, checked, CONTRACT_V1)
    proofs: list[ValueProof] = list(checked.proofs)
    proof = ocr_reasons(
        grounding.extraction, ocr_text, ocr, master_data, read_by_ocr=read_by_ocr, proofs=proofs
    )
    reasons = (*grounding.reasons, *checked.reasons, *proof)
    report = ValidationReport(
        Decision.REVIEW_REQUIRED if reasons else Decision.SUCCEEDED,
        reasons,
        checked.policy_version,
        CONTRACT_V2,
        tuple(proofs),
    )
    return Interpretation(grounding.extraction, report, CONTRACT_V2, tuple(grounding.changes))


def interpret_einvoice(
    xml: bytes,
    master_data: TenantMasterData,
    *,
    schema_version: int,
    today: date,
    policy: ValidationPolicy = DEFAULT_POLICY,
    page_text: str | None = None,
) -> Interpretation:
    """Read an e-invoice's XML without a model, then validate it as a model's answer.

    ``page_text`` is the page that prints the invoice (a Factur-X PDF's text), or None
    for an XML upload. Validation reads the page where there is one, and is
    cross-checked with the XML (``xml_text_mismatch``); an XML upload's text rules read
    what the XML states (its amounts with their currencies, its IBANs:
    :meth:`~pipeline.extraction.EInvoiceReading.stated_text`), never its markup. The
    reader's reasons (``einvoice_invalid``, ``einvoice_not_holdable``,
    ``xml_text_mismatch``) come first; the decision is SUCCEEDED only when neither the
    reader nor any validation rule found one. Never raises on bad XML: that is a reason.

    ``schema_version`` is the contract the job asked for
    (:data:`~pipeline.invoice.SUPPORTED_SCHEMA_VERSIONS`). A v3 job's result holds every
    v3 value the XML states. A v1 job's result holding a v3 value that changes what is
    payable or who is paid is reviewed with ``contract_v3_required`` naming each (the
    result kept as read, for the reviewer); one holding only additional v3 values (a tax
    number beside a VAT id) is that result less them (:func:`~pipeline.invoice.within_v1`),
    validated as read.
    """
    reading = read_einvoice(xml, page_text)
    text = reading.stated_text() if page_text is None else page_text
    checked = validate(reading.extraction, text, master_data, today=today, policy=policy)
    for_job = contract_version_reasons(reading.extraction, schema_version)
    extraction = reading.extraction
    if schema_version < SCHEMA_V3 and not for_job:
        extraction = within_v1(extraction)
    reasons = (*reading.reasons, *for_job, *checked.reasons)
    # A proof that the document states no account holds only where the reader found none.
    refused = {r.field for r in reading.reasons}
    proofs = tuple(p for p in checked.proofs if p.field not in refused)
    # Contract v3 where the result holds what only v3 holds; every other result stays v2.
    contract = CONTRACT_V3 if uses_v3(extraction) else CONTRACT_V2
    report = ValidationReport(
        Decision.REVIEW_REQUIRED if reasons else Decision.SUCCEEDED,
        reasons,
        checked.policy_version,
        contract,
        proofs,
    )
    return Interpretation(extraction, report, contract, reader=reading.reader)
