"""The validation policy: decides SUCCEEDED or REVIEW_REQUIRED for a parsed extraction.

Spec section 4: JSON that parses is not a correct invoice. A schema-valid
:class:`~pipeline.invoice.Extraction` is checked here against the OCR text
the job holds and the tenant's master data. The outcome is a
:class:`ValidationReport`: a decision, machine-readable reasons and the policy
version, all stored on the job.

Invariants:

* ``SUCCEEDED`` if and only if there is no reason. Every rule that fails adds a
  reason; there are no silent downgrades and no warnings that pass.
* A missing (null) or model-flagged-uncertain financial field is a reason
  (``missing_field`` / ``model_uncertain``), never a pass.
* Money is compared as :class:`~decimal.Decimal` rounded explicitly
  (``ROUND_HALF_UP`` to 2 places by default) within ``tolerance`` (default 0).
* Nothing here performs I/O: the OCR text and the model output are data, and no
  content of either can make validation reach the network or change state.
* The rules are pure functions of (extraction, OCR text, master data, today,
  policy), so a stored result can be re-validated under the recorded version.

Rules (one function each, composed by :func:`validate`), by module:

* :mod:`pipeline.validation.policy`: outcome types, :class:`ValidationPolicy`,
  master data types, and presence (required or model-flagged fields; an IBAN left null
  where the text states no account to pay, :mod:`pipeline.validation.payee`);
* :mod:`pipeline.validation.arithmetic`: line, tax, net and gross identities;
* :mod:`pipeline.validation.currency`: ISO 4217, allow list, a second currency in the
  pricing lines;
* :mod:`pipeline.validation.supplier`: supplier (NFKC, confusables, mixed
  script, bidi/invisible characters, VAT id) and IBAN (mod-97, length, presence
  in the OCR text, registration);
* :mod:`pipeline.validation.evidence`: each span resolved against the OCR text
  and showing its value;
* :mod:`pipeline.validation.dates`: date plausibility;
* :mod:`pipeline.validation.document_title`: a page titled as a credit note.

The readings every rule uses (numbers and dates in any European locale, currency
mentions, the comparison forms of text) are the invoice model's
(:mod:`pipeline.invoice`).

This module is the public surface: it re-exports every public name of those
modules, so callers import from ``pipeline.validation.decide`` only. Changing what any
rule accepts means bumping :data:`VALIDATION_POLICY_VERSION`.
"""

from __future__ import annotations

from datetime import date

from pipeline.invoice import Extraction, Reason, TenantMasterData
from pipeline.validation.arithmetic import check_arithmetic
from pipeline.validation.currency import check_currency
from pipeline.validation.dates import check_dates
from pipeline.validation.document_title import check_document_title
from pipeline.validation.evidence import check_evidence
from pipeline.validation.policy import (
    DEFAULT_POLICY,
    Decision,
    ValidationPolicy,
    ValidationReport,
    check_presence,
    iban_absent_proof,
)
from pipeline.validation.supplier import (
    check_iban,
    check_identifier_characters,
    check_payee_account,
    check_supplier,
)


def validate(
    extraction: Extraction,
    ocr_text: str,
    master_data: TenantMasterData,
    *,
    today: date,
    policy: ValidationPolicy = DEFAULT_POLICY,
) -> ValidationReport:
    """Decide SUCCEEDED or REVIEW_REQUIRED for one parsed extraction.

    Args:
        extraction: the parsed model output (see
            :func:`pipeline.invoice.parse_extraction`).
        ocr_text: the OCR text the job holds; pages separated by form feed.
        master_data: the tenant's suppliers and permitted currencies.
        today: the validation date (from the injected clock), for date plausibility.
        policy: the versioned thresholds; its version is recorded in the report.

    Returns:
        A report whose decision is SUCCEEDED exactly when no rule found a reason.
    """
    reasons: list[Reason] = []
    reasons += check_presence(extraction, policy, ocr_text)
    reasons += check_arithmetic(extraction, policy)
    reasons += check_currency(extraction, ocr_text, master_data)
    reasons += check_supplier(extraction, master_data)
    reasons += check_identifier_characters(extraction)
    reasons += check_iban(extraction, ocr_text, master_data)
    reasons += check_payee_account(extraction, master_data)
    reasons += check_evidence(extraction, ocr_text)
    reasons += check_dates(extraction, today, policy)
    reasons += check_document_title(extraction, ocr_text)
    decision = Decision.REVIEW_REQUIRED if reasons else Decision.SUCCEEDED
    proofs = iban_absent_proof(extraction, reasons, policy)
    return ValidationReport(decision, tuple(reasons), policy.version, proofs=proofs)
