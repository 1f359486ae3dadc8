"""An e-invoice read without a model: CII or UBL XML to the extraction result, and what
contract v2 cannot hold of it.

The root element's namespace says which syntax the XML is written in: a UBL 2.1
``Invoice`` or ``CreditNote`` (Peppol BIS 3, XRechnung UBL) is read by
:mod:`pipeline.extraction.ubl`, anything else by :mod:`pipeline.extraction.cii`, which
refuses what is no CII invoice either. Both give the same facts.

The XML is the invoice's own statement, so its values need no grounding: each carries
evidence ``match: "xml"`` whose ``quote`` is the XML path it was read from
(``/rsm:CrossIndustryInvoice/.../ram:GrandTotalAmount``,
``/ubl:Invoice/cac:LegalMonetaryTotal/cbc:TaxInclusiveAmount``). Validation then checks the
result as it checks a model's (master data, arithmetic, dates, policy); the worker
composes the two.

What the XML states and contract v2 has no place for goes to review with
``einvoice_not_holdable`` naming the obstacle, never to a wrong accept; the obstacles are
:mod:`pipeline.extraction.holdability`'s one list, which the corpus benchmark counts by
too. XML that does not parse, or is no CII or UBL invoice, goes to review with
``einvoice_invalid`` and the parser's message; XML that reads but does not validate
against its official schema (:mod:`pipeline.extraction.xml_schema`) goes to review with
``einvoice_invalid`` on field ``schema`` and the validator's messages; XML the schema
accepts that fails a fatal EN 16931 business rule (:mod:`pipeline.extraction.xml_schematron`)
goes to review with ``einvoice_invalid`` on field ``rules`` and the rules' ids and messages.

Where a page prints the invoice (Factur-X/ZUGFeRD: a PDF with the XML embedded), the
page must print the XML's invoice number, issue date, currency and gross total, and
its IBAN and due date where the page proves its own;
otherwise ``xml_text_mismatch`` names the fields (:mod:`pipeline.extraction.page_agreement`):
a page that says one thing and XML that says another is what a forged invoice looks like.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import ValidationError

from pipeline.extraction.cii import cii_facts
from pipeline.extraction.einvoice_facts import InvoiceFacts
from pipeline.extraction.holdability import obstacles
from pipeline.extraction.page_agreement import page_mismatches
from pipeline.extraction.ubl import is_ubl, ubl_facts
from pipeline.extraction.xml_schema import check_schema
from pipeline.extraction.xml_schematron import check_rules
from pipeline.extraction.xml_tree import NotAnEInvoice, parse_xml
from pipeline.invoice import (
    COLLECTED_PAYMENT_MEANS,
    DIRECT_DEBIT_PAYMENT_MEANS,
    NOT_SUBJECT_TO_VAT,
    AllowanceCharge,
    Evidence,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
    Extraction,
    LineAllowanceCharge,
    LineItem,
    PayeeAccount,
    PrecedingInvoice,
    Reason,
    ReasonCode,
    Supplier,
    TaxLine,
    national_account,
)

#: The reader recorded beside a result read from CII XML (the attempt's engine).
CII_READER = "cii-xml/1"
#: The reader recorded beside a result read from UBL XML (the attempt's engine).
UBL_READER = "ubl-xml/1"
#: Either reader: a PDF's kept text names the one its embedded XML is read by, and a
#: retry reads the XML again wherever one of them is named.
EINVOICE_READERS = (CII_READER, UBL_READER)
#: Names of the embedded file that carries the XML of a Factur-X/ZUGFeRD/XRechnung PDF.
EMBEDDED_XML_NAMES = frozenset(
    {"factur-x.xml", "zugferd-invoice.xml", "xrechnung.xml"}  # compared lower-cased
)
_CENT = Decimal("0.01")
_T = TypeVar("_T")


@dataclass(frozen=True)
class EInvoiceReading:
    """An e-invoice's extraction and the reasons it cannot be accepted as read."""

    extraction: Extraction
    reasons: tuple[Reason, ...]
    facts: InvoiceFacts | None = None
    #: Which reader read it (:data:`CII_READER`, :data:`UBL_READER`).
    reader: str = CII_READER

    def stated_text(self) -> str:
        """What the XML states that validation's text rules read, one statement a line.

        An XML upload has no page: its markup is no document text, and read as one, any
        identifier such as ``ANG987654321`` is a price in another currency. What the XML
        states instead: every amount with its ``currencyID`` (``119.00 EUR``, so a second
        currency pricing the invoice is still ``currency_mixed``) and every IBAN it names
        (so an IBAN the XML states is one the document states).
        """
        if self.facts is None:
            return ""
        return "\n".join((*self.facts.stated_amounts, *self.facts.ibans))


def is_embedded_invoice(name: str) -> bool:
    """Whether a PDF attachment's name is one the e-invoice formats give their XML."""
    return name.strip().lower() in EMBEDDED_XML_NAMES


def empty_extraction() -> Extraction:
    return Extraction(
        supplier=Supplier(name=None, vat_id=None),
        invoice_number=None,
        issue_date=None,
        due_date=None,
        currency=None,
        line_items=(),
        tax_lines=(),
        net_total=None,
        tax_total=None,
        gross_total=None,
        iban=None,
        uncertain_fields=(),
    )


def _rate(value: Decimal | None) -> Decimal | None:
    """A rate the XML writes with trailing zeros (``19.000000``) in the contract's two
    decimals, when that loses nothing; any other rate is left to fail the contract."""
    if value is not None and value == value.quantize(_CENT):
        return value.quantize(_CENT)
    return value


_CONTRACT_PLACES = Decimal("1e-6")


def _places(value: Decimal | None) -> Decimal | None:
    """A number the XML writes with more trailing zeros than the contract's six decimals
    (``30.00000000000``) in six, when that loses nothing; any other number is left to
    fail the contract (a price of ``0.061232374`` is not rounded into one)."""
    if value is None or value.as_tuple().exponent >= -6:  # type: ignore[operator]
        return value
    shorter = value.quantize(_CONTRACT_PLACES)
    return shorter if shorter == value else value


def _evidence(path: str) -> Evidence:
    return Evidence(page=1, start=0, end=0, quote=path, match="xml")


def _not_holdable(field: str, detail: str) -> Reason:
    return Reason(ReasonCode.EINVOICE_NOT_HOLDABLE, field, detail, rule="einvoice.not_holdable")


def einvoice_reader(xml: bytes) -> str:
    """The reader of ``xml``: UBL's for a UBL root, CII's for anything else (the CII
    reader is also the one that refuses what is neither)."""
    try:
        root = parse_xml(xml)
    except NotAnEInvoice:
        return CII_READER
    return UBL_READER if is_ubl(root) else CII_READER


def is_einvoice_reader(derived_by: str) -> bool:
    """Whether a kept text's reader names an e-invoice reader (a PDF with its XML)."""
    return any(reader in derived_by for reader in EINVOICE_READERS)


def read_invoice_xml(xml: bytes) -> InvoiceFacts:
    """The facts of a CII or UBL e-invoice, the syntax told by its root element.

    Raises:
        NotAnEInvoice: no XML, a DTD, or a root that is neither a UBL Invoice or
            CreditNote nor a CII invoice.
    """
    root = parse_xml(xml)
    return ubl_facts(root) if is_ubl(root) else cii_facts(root)


def read_einvoice(xml: bytes, page_text: str | None = None) -> EInvoiceReading:
    """Read CII or UBL ``xml``; ``page_text`` (the PDF's text) is cross-checked where given."""
    try:
        facts = read_invoice_xml(xml)
    except NotAnEInvoice as exc:
        reason = Reason(ReasonCode.EINVOICE_INVALID, "document", str(exc), rule="einvoice.invalid")
        return EInvoiceReading(empty_extraction(), (reason,))
    reasons: list[Reason] = []
    schema = check_schema(xml)
    if not schema.valid:
        reasons.append(
            Reason(ReasonCode.EINVOICE_INVALID, "schema", schema.detail(), rule="einvoice.schema")
        )
    else:  # EN 16931's rules read the structure the schema fixes: only XML it accepts
        rules = check_rules(xml)
        if not rules.valid:
            reasons.append(
                Reason(ReasonCode.EINVOICE_INVALID, "rules", rules.detail(), rule="einvoice.rules")
            )
    extraction = _extraction(facts, reasons)
    reasons += [_not_holdable(o.field, str(o)) for o in obstacles(facts, v3=True)]
    reasons += _payee_account_reasons(facts, extraction)
    if page_text is not None:
        reasons += page_mismatches(facts, page_text)
    reader = UBL_READER if facts.syntax.startswith("UBL") else CII_READER
    return EInvoiceReading(extraction, tuple(reasons), facts, reader)


def _payee_account_reasons(facts: InvoiceFacts, extraction: Extraction) -> list[Reason]:
    """``payee_account_not_iban`` where the XML states an account to pay (BT-84) and none
    is an IBAN: it says where to pay, and master data cannot check it. An invoice needing
    no account (a credit note, one the supplier collects) is exempt, as from the IBAN; so
    is one whose account the result holds as ``payee_account`` (a scheme the supplier
    register holds), which validation holds against the accounts on file."""
    if (
        not facts.payee_accounts
        or facts.ibans
        or extraction.pays_no_account()
        or extraction.payee_account is not None
    ):
        return []
    return [
        Reason(
            ReasonCode.PAYEE_ACCOUNT_NOT_IBAN,
            "iban",
            f"the XML's account to pay is no IBAN: {', '.join(facts.payee_accounts)}; "
            "master data cannot check it",
            rule="einvoice.payee_account_not_iban",
        )
    ]


def _extraction(facts: InvoiceFacts, reasons: list[Reason]) -> Extraction:
    paths = facts.paths

    def build(field: str, make: Callable[[], _T]) -> _T | None:
        try:
            return make()
        except (ValidationError, ValueError) as exc:
            reasons.append(_not_holdable(field, f"{field} does not fit the contract: {exc}"))
            return None

    def evidenced(field: str, kind: type[Any], value: object) -> Any:
        if value is None:
            return None
        return build(field, lambda: kind(value=value, evidence=_evidence(paths.get(field, ""))))

    due_path = paths.get("due_date") or paths.get("payment_terms", "")
    due = facts.payable_date
    # Not subject to VAT (EN 16931 BR-O-*): every line, entry and the breakdown are of
    # category O, which has no rate (a stated 0 is dropped, another rate an obstacle).
    category_o = NOT_SUBJECT_TO_VAT if facts.not_subject_to_vat else None

    def rate(value: Decimal | None) -> Decimal | None:
        return None if category_o else _rate(value)

    items: list[LineItem] = []
    for i, item in enumerate(facts.items):
        if None in (item.quantity, item.unit_price, item.line_amount) or (
            item.tax_rate is None and not category_o
        ):
            continue  # an obstacle says so
        made = build(
            f"line_items[{i}]",
            lambda item=item: LineItem(  # type: ignore[misc]
                description=item.name,
                quantity=_places(item.quantity),
                unit_price=_places(item.unit_price),
                line_amount=_places(item.line_amount),
                tax_rate=rate(item.tax_rate),
                tax_category=category_o,
                evidence=_evidence(item.path),
                allowances_charges=tuple(
                    LineAllowanceCharge(
                        kind="charge" if entry.charge else "allowance",
                        amount=_places(entry.amount),
                        reason=entry.reason,
                        reason_code=entry.reason_code,
                        evidence=_evidence(entry.path),
                    )
                    for entry in item.allowances_charges
                    if entry.charge is not None and entry.amount is not None
                ),
                price_basis_quantity=(
                    None
                    if item.basis_quantity in (None, Decimal(1))
                    else _places(item.basis_quantity)
                ),
            ),
        )
        if made is not None:
            items.append(made)
    taxes: list[TaxLine] = []
    for j, tax in enumerate(facts.tax_lines):
        if None in (tax.base, tax.amount) or (tax.rate is None and not category_o):
            continue
        made_tax = build(
            f"tax_lines[{j}]",
            lambda tax=tax: TaxLine(  # type: ignore[misc]
                rate=rate(tax.rate),
                base=tax.base,
                amount=tax.amount,
                evidence=_evidence(tax.path),
                tax_category=category_o,
            ),
        )
        if made_tax is not None:
            taxes.append(made_tax)
    adjustments: list[AllowanceCharge] = []
    for k, entry in enumerate(facts.allowances_charges):
        if (
            entry.charge is None
            or entry.amount is None
            or (entry.tax_rate is None and not category_o)
        ):
            continue  # an obstacle says so
        made_entry = build(
            f"allowances_charges[{k}]",
            lambda entry=entry: AllowanceCharge(  # type: ignore[misc]
                kind="charge" if entry.charge else "allowance",
                amount=entry.amount,
                tax_rate=rate(entry.tax_rate),
                tax_category=entry.tax_category,
                reason=entry.reason,
                reason_code=entry.reason_code,
                evidence=_evidence(entry.path),
            ),
        )
        if made_entry is not None:
            adjustments.append(made_entry)
    preceding = None
    if facts.preceding_invoices and (first := facts.preceding_invoices[0]).number is not None:
        preceding = build(
            "preceding_invoice",
            lambda: PrecedingInvoice(
                number=first.number, issue_date=first.issue_date, evidence=_evidence(first.path)
            ),
        )
    payable = _payable(facts)
    second = facts.tax_currency if facts.tax_currency not in (None, facts.currency) else None
    codes = facts.payment_means
    collected = codes[0] if codes and set(codes) <= COLLECTED_PAYMENT_MEANS else None
    # what the buyer pays no account for (a credit note, a collected invoice) has none
    pays_none = collected is not None or facts.document_type == "credit_note"
    payee_account = None if pays_none else _payee_account(facts, build)
    debit = collected in DIRECT_DEBIT_PAYMENT_MEANS
    return Extraction(
        supplier=Supplier(
            name=evidenced("supplier.name", EvidencedText, facts.seller_name),
            vat_id=evidenced("supplier.vat_id", EvidencedText, facts.seller_vat_id),
            tax_number=evidenced("supplier.tax_number", EvidencedText, facts.seller_tax_number),
        ),
        invoice_number=evidenced("invoice_number", EvidencedText, facts.invoice_number),
        issue_date=evidenced("issue_date", EvidencedDate, facts.issue_date),
        due_date=(
            None
            if due is None
            else build("due_date", lambda: EvidencedDate(value=due, evidence=_evidence(due_path)))
        ),
        currency=evidenced("currency", EvidencedCurrency, facts.currency),
        line_items=tuple(items),
        tax_lines=tuple(taxes),
        net_total=evidenced("net_total", EvidencedAmount, facts.net_total),
        tax_total=_tax_total(facts, taxes)
        or evidenced("tax_total", EvidencedAmount, facts.tax_total),
        gross_total=evidenced("gross_total", EvidencedAmount, facts.gross_total),
        iban=evidenced("iban", EvidencedIban, facts.iban),
        uncertain_fields=(),
        allowances_charges=tuple(adjustments),
        document_type=facts.document_type,
        preceding_invoice=preceding,
        prepaid_amount=evidenced("prepaid_amount", EvidencedAmount, payable.get("prepaid_amount")),
        rounding_amount=evidenced(
            "rounding_amount", EvidencedAmount, payable.get("rounding_amount")
        ),
        amount_due=evidenced("amount_due", EvidencedAmount, payable.get("amount_due")),
        tax_currency=evidenced("tax_currency", EvidencedCurrency, second),
        payment_means=evidenced("payment_means", EvidencedText, collected),
        mandate_reference=evidenced(
            "mandate_reference", EvidencedText, facts.mandate_reference if debit else None
        ),
        debited_account=evidenced(
            "debited_account", EvidencedText, facts.debited_account if debit else None
        ),
        tax_total_in_tax_currency=evidenced(
            "tax_total_in_tax_currency",
            EvidencedAmount,
            None if second is None else facts.tax_total_in_tax_currency,
        ),
        payee_account=payee_account,
    )


def _payee_account(
    facts: InvoiceFacts, build: Callable[[str, Callable[[], PayeeAccount]], PayeeAccount | None]
) -> PayeeAccount | None:
    """The national account to pay (contract v3's ``payee_account``): where the XML states
    no IBAN, its first account to pay (BT-84, in document order, as the result's IBAN is
    the first stated), if of a scheme the supplier register can hold
    (:mod:`pipeline.invoice.national_accounts`). None otherwise (its first account has no
    scheme, or one of another shape: a BIC): the reader then reviews it as
    ``payee_account_not_iban``. A Swedish invoice offering a bankgiro and a plusgiro is
    paid to the first, which must be on file; the ERP is told to pay that one."""
    if facts.ibans or not facts.stated_accounts:
        return None
    first = facts.stated_accounts[0]
    canonical = national_account(first.scheme, first.id)
    if canonical is None:
        return None
    scheme, _, ident = canonical.rpartition(":")
    return build(
        "payee_account",
        lambda: PayeeAccount(scheme=scheme, id=ident, evidence=_evidence(first.path)),
    )


def _tax_total(facts: InvoiceFacts, taxes: list[TaxLine]) -> EvidencedAmount | None:
    """The tax total of an invoice not subject to VAT whose XML leaves BT-110 out (CII
    may): its one breakdown's tax amount (BT-117), which is 0 (BR-O-09) and which
    BR-CO-14 makes the total; evidence the breakdown's path. Otherwise None: the total
    is read as stated."""
    if facts.tax_total is not None or not facts.not_subject_to_vat or len(taxes) != 1:
        return None
    (tax,) = taxes
    return EvidencedAmount(value=tax.amount, evidence=tax.evidence)


def _payable(facts: InvoiceFacts) -> dict[str, Decimal]:
    """BT-113 to BT-115 where the amount due is not the gross total (nothing otherwise):
    the amount due, and the prepaid and rounding amounts the XML states other than 0."""
    due, gross = facts.due_payable, facts.gross_total
    if due is None or gross is None or due == gross:
        return {}
    out = {"amount_due": due}
    if facts.prepaid:
        out["prepaid_amount"] = facts.prepaid
    if facts.rounding:
        out["rounding_amount"] = facts.rounding
    return out
