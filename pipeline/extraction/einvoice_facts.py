"""What an e-invoice's XML says about one invoice, whichever syntax it was written in.

The CII reader (:mod:`pipeline.extraction.cii`) and the UBL reader
(:mod:`pipeline.extraction.ubl`) both read into :class:`InvoiceFacts`, so what decides
whether contract v2 can hold an invoice (:mod:`pipeline.extraction.holdability`), the
extraction result (:mod:`pipeline.extraction.einvoice`) and the page cross-check
(:mod:`pipeline.extraction.page_agreement`) are written once for both.

The facts hold more than the evaluation's truth: the document type, allowances and
charges, price basis quantities and currencies are what decides whether extraction
contract v2 can hold the invoice at all. Each field read keeps the XML path it was read
from (``paths``), the evidence of a value read without a model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

_PROFILE_NAMES = (  # checked in this order: "basicwl" before "basic", "xrechnung" first
    ("xrechnung", "XRECHNUNG"),
    ("minimum", "MINIMUM"),
    ("basicwl", "BASIC-WL"),
    ("basic", "BASIC"),
    ("extended", "EXTENDED"),
    ("comfort", "COMFORT"),
    ("en16931", "EN16931"),
)
#: Document type codes (UNTDID 1001) of credit notes: the amounts are owed to the buyer.
CREDIT_NOTE_TYPES = frozenset({"81", "83", "261", "262", "296", "308", "381", "396", "420", "532"})
#: The commercial credit note (UNTDID 1001 381), the one credit note contract v3 holds.
CREDIT_NOTE = "381"
#: The corrected invoice (UNTDID 1001 384).
CORRECTIVE_INVOICE = "384"
#: The VAT category "not subject to VAT" (UNCL 5305 ``O``, EN 16931 BR-O-*): no rate, no
#: tax, and no seller VAT id (BR-O-02 to BR-O-04).
NOT_SUBJECT_TO_VAT = "O"


_DATE = r"([0-9]{1,2})\.([0-9]{1,2})\.([0-9]{4})"
#: Phrases of German payment terms that name the one day the whole amount is due; a discount
#: deadline ("3% Skonto ... bis 15.03.") and a list of instalment days never match.
_DUE_PHRASES = re.compile(
    rf"(?:netto|ohne Abzug|ohne Abschlag)\s+bis(?:\s+zum)?\s+{_DATE}"
    rf"|bis zum\s+{_DATE}"
    rf"|Fälligkeit\s+{_DATE}(?!\s*,\s*[0-9])"
    rf"|wird am\s+{_DATE}",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class AllowanceFacts:
    """One allowance or charge (EN 16931 BG-20, BG-21 at document level; BG-27, BG-28 on a
    line, whose rate is the line's; ``None``: absent).

    CII: ``SpecifiedTradeAllowanceCharge`` (``ChargeIndicator``, ``ActualAmount``,
    ``Reason``, ``ReasonCode``, ``CategoryTradeTax``) or a ``SpecifiedLogisticsServiceCharge``
    (a charge: ``AppliedAmount``, ``Description``, ``AppliedTradeTax``); UBL:
    ``cac:AllowanceCharge`` (``ChargeIndicator``, ``Amount``, ``AllowanceChargeReason``,
    ``AllowanceChargeReasonCode``, ``TaxCategory``).
    """

    charge: bool | None  # None: an indicator that is neither true nor false
    amount: Decimal | None
    tax_rate: Decimal | None
    tax_category: str | None
    reason: str | None
    reason_code: str | None
    path: str = ""


@dataclass(frozen=True)
class ItemFacts:
    """One invoice line as the XML states it (``None``: absent)."""

    name: str
    quantity: Decimal | None
    unit_price: Decimal | None  # net price (CII ChargeAmount, UBL PriceAmount) per basis_quantity
    basis_quantity: Decimal | None
    line_amount: Decimal | None
    tax_rate: Decimal | None
    #: Line-level allowances and charges (BG-27, BG-28; not those inside the price), whose
    #: ``tax_rate`` and ``tax_category`` are None: they take the line's.
    allowances_charges: tuple[AllowanceFacts, ...]
    line_status: str | None  # CII EXTENDED sub-lines: DETAIL / GROUP / INFORMATION; UBL: GROUP
    path: str = ""  # the line item's XML path
    #: The line's VAT category code (BT-151: UBL ``ClassifiedTaxCategory/ID``, CII
    #: ``ApplicableTradeTax/CategoryCode``).
    tax_category: str | None = None


@dataclass(frozen=True)
class TaxFacts:
    """One header tax breakdown (CII ``ApplicableTradeTax``, UBL ``TaxSubtotal``)."""

    rate: Decimal | None
    base: Decimal | None
    amount: Decimal | None
    category: str | None
    path: str = ""  # the breakdown's XML path


@dataclass(frozen=True)
class AccountFacts:
    """One account to pay that is no IBAN (EN 16931 BT-84): its id as stated, the scheme
    the XML names it by (UBL: the ID's ``schemeID``, else the bank branch's ID, Peppol's
    ``SE:BANKGIRO``; CII states none: None), and the path it was read from."""

    id: str
    scheme: str | None
    path: str = ""


@dataclass(frozen=True)
class PrecedingFacts:
    """One preceding invoice reference (EN 16931 BG-3): the number (BT-25) and issue date
    (BT-26). UBL: ``cac:BillingReference/cac:InvoiceDocumentReference`` (``cbc:ID``,
    ``cbc:IssueDate``); CII: the header settlement's ``InvoiceReferencedDocument``
    (``IssuerAssignedID``, ``FormattedIssueDateTime``)."""

    number: str | None
    issue_date: date | None
    path: str = ""


def document_type(type_code: str | None) -> str:
    """The contract's document type of a UNTDID 1001 code: ``credit_note`` for every
    credit note code, ``corrective_invoice`` for 384, ``invoice`` for anything else (the
    obstacles name each code contract v3 does not hold)."""
    code = type_code or ""
    if code in CREDIT_NOTE_TYPES:
        return "credit_note"
    return "corrective_invoice" if code == CORRECTIVE_INVOICE else "invoice"


def indicator(value: str | None) -> bool | None:
    """An XML boolean (``true``/``false``, ``1``/``0``); anything else is None."""
    folded = (value or "").strip().lower()
    return {"true": True, "1": True, "false": False, "0": False}.get(folded)


@dataclass(frozen=True)
class InvoiceFacts:
    """What the XML says about one invoice, and what decides whether v2 can hold it."""

    #: CII-D16B (ZUGFeRD 2.x, Factur-X), CII-D13B (ZUGFeRD 1.0), CII-CBFBUY (1.0 RC),
    #: UBL-Invoice, UBL-CreditNote (UBL 2.1: Peppol BIS 3, XRechnung UBL)
    syntax: str
    guideline: str
    type_code: str | None
    invoice_number: str | None
    issue_date: date | None
    due_date: date | None
    currency: str | None
    tax_currency: str | None
    seller_name: str | None
    seller_vat_id: str | None
    seller_tax_number: str | None
    ibans: tuple[str, ...]
    net_total: Decimal | None  # CII TaxBasisTotalAmount, UBL TaxExclusiveAmount
    tax_total: Decimal | None  # TaxTotalAmount in the invoice currency
    tax_total_currencies: tuple[str, ...]
    gross_total: Decimal | None  # CII GrandTotalAmount, UBL TaxInclusiveAmount
    line_total: Decimal | None
    charge_total: Decimal | None
    allowance_total: Decimal | None
    prepaid: Decimal | None  # BT-113: CII TotalPrepaidAmount, UBL PrepaidAmount
    due_payable: Decimal | None  # BT-115: CII DuePayableAmount, UBL PayableAmount
    document_allowances_charges: int  # header allowances, charges and logistics charges
    payment_terms: tuple[str, ...]
    items: tuple[ItemFacts, ...] = field(default=())
    tax_lines: tuple[TaxFacts, ...] = field(default=())
    #: The XML path each header field was read from (``invoice_number``, ``gross_total``...).
    paths: Mapping[str, str] = field(default_factory=dict)
    #: Every amount stated with a ``currencyID``, as ``"119.00 EUR"`` (in document order).
    stated_amounts: tuple[str, ...] = field(default=())
    #: The document-level allowances and charges, in document order.
    allowances_charges: tuple[AllowanceFacts, ...] = field(default=())
    #: The preceding invoice references (BG-3), in document order.
    preceding_invoices: tuple[PrecedingFacts, ...] = field(default=())
    #: BT-114, the rounding amount: CII ``RoundingAmount``, UBL ``PayableRoundingAmount``.
    rounding: Decimal | None = None
    #: BT-111, the tax total in the tax currency (BT-6) where that is not the invoice's:
    #: the ``TaxTotalAmount`` (CII) or ``TaxTotal/TaxAmount`` (UBL) in ``tax_currency``.
    tax_total_in_tax_currency: Decimal | None = None
    #: The payment means codes (BT-81, UNTDID 4461) in document order: CII
    #: ``SpecifiedTradeSettlementPaymentMeans/TypeCode``, UBL ``PaymentMeansCode``.
    payment_means: tuple[str, ...] = field(default=())
    #: BT-89, the direct debit's mandate reference (the first stated): CII
    #: ``SpecifiedTradePaymentTerms/DirectDebitMandateID``, UBL
    #: ``PaymentMeans/PaymentMandate/ID``.
    mandate_reference: str | None = None
    #: BT-91, the account a direct debit debits, the buyer's (the first stated, spaces
    #: removed): CII ``SpecifiedTradeSettlementPaymentMeans/PayerPartyDebtorFinancialAccount/
    #: IBANID``, UBL ``PaymentMeans/PaymentMandate/PayerFinancialAccount/ID``.
    debited_account: str | None = None
    #: BT-84 accounts to pay that are no IBAN, each with what names it (a Swedish bankgiro
    #: ``"5050-1055 (bank SE:BANKGIRO)"``: the scheme or bank the XML names, else its
    #: payment means code): UBL ``PaymentMeans/PayeeFinancialAccount/ID`` not shaped as an
    #: IBAN, CII ``PayeePartyCreditorFinancialAccount/ProprietaryID`` without an IBAN.
    payee_accounts: tuple[str, ...] = ()
    #: The same accounts structured (id, scheme, path), in document order.
    stated_accounts: tuple[AccountFacts, ...] = ()

    @property
    def profile(self) -> str:
        """A short profile name from the guideline URN (``EN16931``, ``BASIC-WL``, ...)."""
        urn = self.guideline.lower().replace("-", "").replace("_", "")
        for needle, name in _PROFILE_NAMES:
            if needle in urn:
                return name
        return "UNKNOWN"

    @property
    def payable_date(self) -> date | None:
        """``DueDateDateTime``, else the one due date the payment terms' text states."""
        return self.due_date or due_date_from_terms(self.payment_terms)

    @property
    def document_type(self) -> str:
        """The contract's document type (:func:`document_type`)."""
        return document_type(self.type_code)

    @property
    def iban(self) -> str | None:
        return self.ibans[0] if self.ibans else None

    @property
    def states_category_o(self) -> bool:
        """Whether any line, allowance, charge or tax breakdown states category ``O``."""
        return NOT_SUBJECT_TO_VAT in self.tax_categories

    @property
    def tax_categories(self) -> frozenset[str | None]:
        """Every VAT category code the lines, allowances, charges and breakdowns state."""
        return frozenset(
            (
                *(t.category for t in self.tax_lines),
                *(i.tax_category for i in self.items),
                *(e.tax_category for e in self.allowances_charges),
            )
        )

    @property
    def not_subject_to_vat(self) -> bool:
        """An invoice not subject to VAT as EN 16931 writes one: exactly one tax breakdown,
        of category ``O`` (BR-O-01, BR-O-11), and every line, allowance and charge of
        category ``O`` too (BR-O-12 to BR-O-14)."""
        return len(self.tax_lines) == 1 and self.tax_categories == {NOT_SUBJECT_TO_VAT}


def due_date_from_terms(terms: Sequence[str]) -> date | None:
    """The due date the payment terms' text states, where the XML has no ``DueDateDateTime``.

    EN 16931 lets a seller write the due date into the terms' description only
    ("Zahlbar innerhalb 30 Tagen netto bis 04.04.2018, 3% Skonto ... bis 15.03.2018"). The
    page prints that sentence, and a reader rightly takes 2018-04-04 from it: a truth of
    ``null`` would score that reading as wrong. Only one unambiguous phrase counts; two
    different dates give ``None``.
    """
    found: set[date] = set()
    for text in terms:
        for match in _DUE_PHRASES.finditer(text):
            d, m, y = (g for g in match.groups() if g is not None)
            try:
                found.add(date(int(y), int(m), int(d)))
            except ValueError:
                continue
    return found.pop() if len(found) == 1 else None
