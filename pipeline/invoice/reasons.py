"""Reasons: why a value was refused or a result needs review, each naming its rule.

Reasons are part of the result: grounding gives them for what it cannot prove,
validation for what fails a check, and both store them with the job in the same
shape. :class:`ReasonCode` says what kind of problem it is; ``Reason.rule`` names
the rule that found it (:data:`~pipeline.invoice.rules.RULES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipeline.invoice.rules import RULES


class ReasonCode(StrEnum):
    MISSING_FIELD = "missing_field"
    MODEL_UNCERTAIN = "model_uncertain"
    LINE_AMOUNT_MISMATCH = "line_amount_mismatch"
    NET_TOTAL_MISMATCH = "net_total_mismatch"
    TAX_BASE_MISMATCH = "tax_base_mismatch"
    TAX_LINE_MISMATCH = "tax_line_mismatch"
    TAX_TOTAL_MISMATCH = "tax_total_mismatch"
    GROSS_TOTAL_MISMATCH = "gross_total_mismatch"
    CURRENCY_NOT_ISO4217 = "currency_not_iso4217"
    CURRENCY_NOT_PERMITTED = "currency_not_permitted"
    CURRENCY_MIXED = "currency_mixed"
    SUPPLIER_UNKNOWN = "supplier_unknown"
    SUPPLIER_CONFUSABLE = "supplier_confusable"
    SUPPLIER_MIXED_SCRIPT = "supplier_mixed_script"
    VAT_ID_MISMATCH = "vat_id_mismatch"
    #: Contract v3: the tax number (BT-32) an e-invoice states is not the one on file for
    #: the supplier (or none is on file), where it identifies the supplier (no VAT id) or
    #: the supplier has one on file.
    TAX_NUMBER_MISMATCH = "tax_number_mismatch"
    #: Contract v3: an invoice not subject to VAT (category O) states neither VAT id nor
    #: tax number, and the IBAN it states (its one identifier master data can hold) is not
    #: on file for the supplier of that name, or it states none.
    SUPPLIER_UNIDENTIFIED = "supplier_unidentified"
    BIDI_CONTROL = "bidi_control"
    INVISIBLE_CHARACTER = "invisible_character"
    IBAN_CHECKSUM_INVALID = "iban_checksum_invalid"
    IBAN_LENGTH_INVALID = "iban_length_invalid"
    IBAN_NOT_IN_TEXT = "iban_not_in_text"
    IBAN_NOT_REGISTERED = "iban_not_registered"
    #: The document states an account to pay that is not an IBAN (an e-invoice's BT-84 a
    #: Swedish bankgiro, a page's "Kontonummer"): master data cannot check it, so it is
    #: never paid unchecked; the detail names the scheme or label.
    PAYEE_ACCOUNT_NOT_IBAN = "payee_account_not_iban"
    #: The national account to pay the result holds (contract v3's ``payee_account``, a
    #: Swedish bankgiro) is not on file for the supplier: never paid unchecked.
    PAYEE_ACCOUNT_NOT_REGISTERED = "payee_account_not_registered"
    EVIDENCE_OUT_OF_RANGE = "evidence_out_of_range"
    EVIDENCE_QUOTE_MISMATCH = "evidence_quote_mismatch"
    EVIDENCE_VALUE_MISMATCH = "evidence_value_mismatch"
    EVIDENCE_DUPLICATE = "evidence_duplicate"
    DATE_IMPLAUSIBLE = "date_implausible"
    #: Contract v2: a value the model gave that grounding could not find in the text.
    UNGROUNDED_VALUE = "ungrounded_value"
    #: Contract v2: two readings pass the same checks and nothing printed (a column
    #: header, a unit, a currency, a label) proves which one the document means: the
    #: quantity and unit price of a row, an invoice number or a date without its label.
    AMBIGUOUS_ROLE = "ambiguous_role"
    #: A value OCR read is not proven by its words' confidence, the word lists or master
    #: data (a misread character grounds as printed); ``document`` where OCR kept none.
    OCR_UNVERIFIED = "ocr_unverified"
    #: Another job of the tenant already holds this supplier invoice (same supplier,
    #: number and gross total); set by the job store when it commits the result,
    #: never by the rules here (``pipeline.jobs.duplicates``).
    DUPLICATE_INVOICE = "duplicate_invoice"
    #: Another job of the tenant holds an invoice this one may duplicate: the same
    #: supplier and number with another total, or the same supplier, total and issue
    #: date with a number printed differently; set by the job store
    #: (``pipeline.jobs.near_duplicates``), never by the rules here.
    POSSIBLE_DUPLICATE = "possible_duplicate"
    #: An e-invoice's XML states what contract v2 has no place for (allowances and
    #: charges, a credit note, a supplier without VAT id...): the detail names it.
    EINVOICE_NOT_HOLDABLE = "einvoice_not_holdable"
    #: The job asked for schema_version 1 and its result holds contract v3 values that
    #: change what is payable or who is paid (an amount due, allowances and charges...):
    #: the detail names them (:func:`pipeline.invoice.binding_v3_fields`).
    CONTRACT_V3_REQUIRED = "contract_v3_required"
    #: An e-invoice's XML does not parse, or is no invoice the reader knows.
    EINVOICE_INVALID = "einvoice_invalid"
    #: The page of a PDF e-invoice does not print what its embedded XML states.
    XML_TEXT_MISMATCH = "xml_text_mismatch"
    #: The page states an amount to pay other than the gross total (a payment already
    #: made, a deposit): contract v2 holds the gross only, so the ERP would pay it again.
    AMOUNT_DUE_DIFFERS = "amount_due_differs"
    #: The page is titled as a credit note or a corrected invoice ("Gutschrift", "Avoir",
    #: "Nota di credito", "Rechnungskorrektur"...) and the result is no credit note read
    #: from its XML: a model's answer holds invoices only, so it is never accepted as one.
    CREDIT_NOTE_UNSUPPORTED_ON_TEXT = "credit_note_unsupported_on_text"
    #: A credit note names a preceding invoice the tenant has no delivered invoice of (same
    #: supplier and number); set by the job store (``pipeline.jobs.credit_notes``).
    CREDIT_NOTE_REFERENCE_UNKNOWN = "credit_note_reference_unknown"
    #: A credit note's preceding invoice matches several invoices of the tenant (same
    #: supplier and number, other totals); set by the job store.
    CREDIT_NOTE_REFERENCE_AMBIGUOUS = "credit_note_reference_ambiguous"


@dataclass(frozen=True)
class Reason:
    """Why a result needs review: ``field`` is a path such as ``line_items[3].line_amount``;
    ``rule`` the id of the rule that gave it (:data:`pipeline.invoice.rules.RULES`).

    A reason stored before rules had ids has none, so ``rule`` is optional and
    :meth:`as_dict` writes it only when set.
    """

    code: ReasonCode
    field: str
    detail: str
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.rule is not None and self.rule not in RULES:
            raise ValueError(f"unregistered rule id {self.rule!r}")

    def as_dict(self) -> dict[str, str]:
        out = {"code": self.code.value, "field": self.field, "detail": self.detail}
        if self.rule is not None:
            out["rule"] = self.rule
        return out
