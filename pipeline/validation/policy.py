"""What validation decides and under which policy: outcome, thresholds, master data, presence.

Every rule module (``validation_arithmetic``, ``validation_currency``,
``validation_identity``, ``validation_evidence``, ``validation_dates``) speaks
in the types defined here, and :func:`pipeline.validation.decide.validate` composes
them into a :class:`ValidationReport`.

Invariants:

* ``SUCCEEDED`` if and only if a report holds no :class:`Reason`.
* Every field a :class:`ValidationPolicy` may require has a getter in
  ``_FIELD_GETTERS`` (a test checks the two sets agree), so a required field
  that is null always yields ``missing_field``.
* Any change to a default of :class:`ValidationPolicy` is a new
  :data:`VALIDATION_POLICY_VERSION`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pipeline.invoice import (
    EXTRACTION_SCHEMA_VERSION,
    SCALAR_FIELDS,
    Extraction,
    Reason,
    ReasonCode,
)
from pipeline.states import JobState
from pipeline.validation.payee import check_iban_absent

if TYPE_CHECKING:
    from pipeline.settings import Settings

#: Version of the rules below; recorded on the job with every decision.
#: /2: dates read with CLDR month names of every European language (connective
#: forms such as "5 de marzo de 2025"); a second currency counts only in the
#: invoice's pricing lines (see :func:`pipeline.validation.currency.pricing_lines`).
#: /3: a page titled as a credit note or correction is reviewed unless its XML states a
#: credit note (:mod:`pipeline.validation.document_title`); a credit note needs no IBAN.
#: /4: an invoice that states no account to pay needs no IBAN (the ERP pays the account on
#: file, :mod:`pipeline.validation.payee`); one stating an account that is no IBAN is
#: ``payee_account_not_iban``.
VALIDATION_POLICY_VERSION = "fenceline.validation/4"


class Decision(StrEnum):
    """Validation outcome; each value is the :class:`JobState` the job moves to."""

    #: Eligible for ERP delivery.
    SUCCEEDED = "SUCCEEDED"
    #: Inspectable but unacceptable; withheld from delivery until a reviewer decides.
    REVIEW_REQUIRED = "REVIEW_REQUIRED"

    @property
    def job_state(self) -> JobState:
        return JobState(self.value)


#: Arithmetic reason codes; a perturbed amount must produce at least one of them.
ARITHMETIC_CODES: frozenset[ReasonCode] = frozenset(
    {
        ReasonCode.LINE_AMOUNT_MISMATCH,
        ReasonCode.NET_TOTAL_MISMATCH,
        ReasonCode.TAX_BASE_MISMATCH,
        ReasonCode.TAX_LINE_MISMATCH,
        ReasonCode.TAX_TOTAL_MISMATCH,
        ReasonCode.GROSS_TOTAL_MISMATCH,
    }
)


@dataclass(frozen=True)
class ValueProof:
    """A check a value passed that is worth telling (``fenceline explain`` prints it):
    ``rule`` an id of :data:`pipeline.invoice.rules.RULES`."""

    field: str
    rule: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule, "detail": self.detail}


@dataclass(frozen=True)
class ValidationReport:
    """The stored outcome: ``decision`` is SUCCEEDED exactly when ``reasons`` is empty;
    ``proofs`` what a value passed that only the page could show (an OCR'd word proven
    bare by its image), stored only where there is one."""

    decision: Decision
    reasons: tuple[Reason, ...]
    policy_version: str
    schema_version: str = EXTRACTION_SCHEMA_VERSION
    proofs: tuple[ValueProof, ...] = ()

    @property
    def codes(self) -> frozenset[ReasonCode]:
        return frozenset(r.code for r in self.reasons)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the job row, the review API and the audit trail."""
        out: dict[str, Any] = {
            "decision": self.decision.value,
            "reasons": [r.as_dict() for r in self.reasons],
            "policy_version": self.policy_version,
            "schema_version": self.schema_version,
        }
        if self.proofs:
            out["proofs"] = [p.as_dict() for p in self.proofs]
        return out


#: Paths a policy may require; each names a nullable field or a list of the contract.
REQUIRABLE_FIELDS: frozenset[str] = frozenset({*SCALAR_FIELDS, "line_items", "tax_lines"})
DEFAULT_REQUIRED_FIELDS: frozenset[str] = frozenset(
    {
        "supplier.name",
        "supplier.vat_id",
        "invoice_number",
        "issue_date",
        "currency",
        "line_items",
        "net_total",
        "tax_total",
        "gross_total",
        "iban",
    }
)


@dataclass(frozen=True)
class ValidationPolicy:
    """Tunable thresholds; any change to a default is a new policy version.

    Attributes:
        tolerance: largest accepted absolute difference in every arithmetic identity.
        money_places: decimal places computed amounts are rounded to.
        rounding: :mod:`decimal` rounding mode for computed amounts.
        max_future_days: how far after ``today`` an issue date may lie.
        max_invoice_age_days: how far before ``today`` an issue date may lie.
        max_payment_term_days: largest due date - issue date.
        required_fields: paths whose null value forces review.
        malformed_exhausted_state: where the job driver sends a job whose attempts
            all returned malformed output (nothing inspectable: terminal by default).
    """

    version: str = VALIDATION_POLICY_VERSION
    tolerance: Decimal = Decimal("0.00")
    money_places: int = 2
    rounding: str = ROUND_HALF_UP
    max_future_days: int = 1
    max_invoice_age_days: int = 730
    max_payment_term_days: int = 180
    required_fields: frozenset[str] = DEFAULT_REQUIRED_FIELDS
    malformed_exhausted_state: JobState = JobState.FAILED_TERMINAL

    def __post_init__(self) -> None:
        if self.tolerance < 0:
            raise ValueError("tolerance must be >= 0")
        if unknown := self.required_fields - REQUIRABLE_FIELDS:
            raise ValueError(f"unknown required fields: {sorted(unknown)}")
        if self.malformed_exhausted_state not in (
            JobState.REVIEW_REQUIRED,
            JobState.FAILED_TERMINAL,
        ):
            raise ValueError("malformed_exhausted_state must be REVIEW_REQUIRED or FAILED_TERMINAL")

    def round(self, value: Decimal) -> Decimal:
        return value.quantize(Decimal(1).scaleb(-self.money_places), rounding=self.rounding)


DEFAULT_POLICY = ValidationPolicy()

#: Reason code of a REVIEW_REQUIRED job whose attempts all returned output that
#: is not a schema-valid extraction (see :func:`unvalidated_outcome`). Not a
#: :class:`ReasonCode`: validation never produces it.
MALFORMED_OUTPUT = "malformed_output"


def policy_for(settings: Settings) -> ValidationPolicy:
    """The deployment's policy: the defaults with what :class:`Settings` may change.

    ``malformed_exhausted_state`` only routes jobs that never produced a
    schema-valid extraction; it changes no rule, so the version stays the same.
    """
    exhausted = (
        JobState.REVIEW_REQUIRED
        if settings.malformed_exhausted_state == "review"
        else JobState.FAILED_TERMINAL
    )
    return ValidationPolicy(malformed_exhausted_state=exhausted)


def unvalidated_outcome(
    raw_output: str, detail: str, policy: ValidationPolicy = DEFAULT_POLICY
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (result, validation) stored for malformed output sent to review.

    ``schema_valid: false`` and the :data:`MALFORMED_OUTPUT` reason say that the
    result is the model's raw text, which no rule has checked: a reviewer may
    reject such a job but never approve it into delivery
    (``job_decide_review_if_pending`` in ``sql/queries/review.sql`` refuses an
    approval where ``schema_valid`` is false).
    """
    return (
        {"raw_output": raw_output},
        {
            "decision": Decision.REVIEW_REQUIRED.value,
            "reasons": [{"code": MALFORMED_OUTPUT, "field": "", "detail": detail}],
            "policy_version": policy.version,
            "schema_valid": False,
        },
    )


_FIELD_GETTERS: Mapping[str, Callable[[Extraction], object]] = {
    "supplier.name": lambda e: e.supplier.name,
    "supplier.vat_id": lambda e: e.supplier.vat_id,
    "invoice_number": lambda e: e.invoice_number,
    "issue_date": lambda e: e.issue_date,
    "due_date": lambda e: e.due_date,
    "currency": lambda e: e.currency,
    "line_items": lambda e: e.line_items or None,
    "tax_lines": lambda e: e.tax_lines or None,
    "net_total": lambda e: e.net_total,
    "tax_total": lambda e: e.tax_total,
    "gross_total": lambda e: e.gross_total,
    "iban": lambda e: e.iban,
}


def iban_absent_proof(
    extraction: Extraction, reasons: Sequence[Reason], policy: ValidationPolicy = DEFAULT_POLICY
) -> tuple[ValueProof, ...]:
    """The proof that a required IBAN left null is absent (rule ``validation.iban_absent``),
    where :func:`check_presence` read the text and found it states no account to pay."""
    if (
        extraction.iban is not None
        or extraction.payee_account is not None
        or "iban" not in policy.required_fields
        or extraction.pays_no_account()
        or any(r.field == "iban" for r in reasons)
    ):
        return ()
    return (
        ValueProof(
            "iban",
            "validation.iban_absent",
            "the document states no account to pay: the ERP pays the supplier's account on file",
        ),
    )


def check_presence(
    extraction: Extraction, policy: ValidationPolicy = DEFAULT_POLICY, text: str | None = None
) -> list[Reason]:
    """A required field that is null (or an empty list) and every field the model flagged.

    A credit note needs no IBAN: the supplier owes the amount, so its account is no
    payee of the buyer's (and EN 16931 makes payment instructions optional on one). Nor
    does an invoice the supplier collects by card or direct debit (contract v3's
    ``payment_means``): the buyer pays no account of the supplier's. A supplier an
    e-invoice identifies by its tax number (contract v3's ``supplier.tax_number``) needs
    no VAT id: :func:`~pipeline.validation.supplier.check_supplier` holds the tax number
    against master data instead. Nor does an invoice not subject to VAT (contract v3:
    its tax line of category ``O``), which EN 16931 forbids to state one (BR-O-02): the
    supplier is then proven by its tax number or, without one, its IBAN on file
    (``supplier_unidentified``).

    With ``text`` (what the result was read from: the page, or what an XML upload
    states), a required IBAN left null is no ``missing_field`` where the text states no
    account to pay (:mod:`pipeline.validation.payee`): the ERP pays the supplier's account
    on file. Without ``text`` it is one. Nor is one where the result holds a national
    account to pay (contract v3's ``payee_account``, a Swedish bankgiro): that is the
    account paid, held against the supplier's on file
    (:func:`~pipeline.validation.supplier.check_payee_account`)."""
    paid_elsewhere = extraction.pays_no_account() or extraction.payee_account is not None
    exempt = {"iban"} if paid_elsewhere else set()
    if extraction.supplier.tax_number is not None or extraction.not_subject_to_vat():
        exempt.add("supplier.vat_id")  # contract v3: the tax number or IBAN identifies it
    reasons: list[Reason] = []
    if text is not None and extraction.iban is None and "iban" in policy.required_fields:
        if "iban" not in exempt:
            reasons += check_iban_absent(text)
        exempt.add("iban")
    reasons += [
        Reason(
            ReasonCode.MISSING_FIELD,
            path,
            "required by policy but null or empty",
            rule="validation.missing_field",
        )
        for path, get in _FIELD_GETTERS.items()
        if path in policy.required_fields - exempt and get(extraction) is None
    ]
    second: tuple[tuple[str, object], ...] = (
        ("tax_currency", extraction.tax_currency),
        ("tax_total_in_tax_currency", extraction.tax_total_in_tax_currency),
    )
    if sum(value is None for _, value in second) == 1:
        # a second currency (contract v3) comes with the tax total in it, and vice versa
        reasons += [
            Reason(
                ReasonCode.MISSING_FIELD,
                path,
                "a tax currency and the tax total in it are stated together",
                rule="validation.missing_field",
            )
            for path, value in second
            if value is None
        ]
    reasons += [
        Reason(
            ReasonCode.MODEL_UNCERTAIN,
            path,
            "the model marked this field as uncertain",
            rule="validation.model_uncertain",
        )
        for path in extraction.uncertain_fields
    ]
    return reasons
