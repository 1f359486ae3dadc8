"""The truth of one e-invoice, read from its OASIS UBL 2.1 XML (Invoice or CreditNote).

EN 16931's second syntax: Peppol BIS Billing 3.0 and XRechnung UBL write an
``Invoice`` (``urn:oasis:names:specification:ubl:schema:xsd:Invoice-2``) or a
``CreditNote`` (``...:CreditNote-2``), whose lines are ``InvoiceLine`` /
``CreditNoteLine`` with ``InvoicedQuantity`` / ``CreditedQuantity``. The reader gives the
same :class:`~pipeline.extraction.einvoice_facts.InvoiceFacts` the CII reader
(:mod:`pipeline.extraction.cii`) gives, so contract v2's obstacles
(:mod:`pipeline.extraction.holdability`), the extraction result and the page cross-check
are the same for both. Each field keeps the XML path it was read from, written with
Peppol's prefixes (``/ubl:Invoice/cac:LegalMonetaryTotal/cbc:TaxInclusiveAmount``).

EN 16931's UBL binding, as read here: the seller's name (BT-27) is
``PartyLegalEntity/RegistrationName``, its VAT id (BT-31) the ``PartyTaxScheme`` whose
``TaxScheme/ID`` is ``VAT``, its tax number (BT-32) another ``PartyTaxScheme``; net,
gross and payable totals are ``TaxExclusiveAmount``, ``TaxInclusiveAmount`` and
``PayableAmount``; the due date (BT-9) is ``DueDate`` (an Invoice) or
``PaymentMeans/PaymentDueDate`` (a CreditNote); the IBAN is the credit transfer's
``PayeeFinancialAccount/ID`` where it is one (a national account number is not).

A CreditNote without a type code is a credit note (381). An XRechnung extension line
with ``SubInvoiceLine`` children is a group of sub-lines (``line_status`` ``GROUP``),
which contract v2 cannot hold either.

The bytes are parsed by :func:`~pipeline.extraction.xml_tree.parse_xml`: a DTD or
entity declaration is refused before parsing.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import date

from pipeline.extraction.einvoice_facts import (
    CREDIT_NOTE,
    AccountFacts,
    AllowanceFacts,
    InvoiceFacts,
    ItemFacts,
    PrecedingFacts,
    TaxFacts,
    indicator,
)
from pipeline.extraction.xml_tree import (
    NotAnEInvoice,
    XmlPaths,
    child,
    children,
    decimal,
    local,
    namespace,
    parse_xml,
    path,
    stated_amounts,
    text,
)
from pipeline.invoice import names_a_registration

__all__ = ["UBL_NAMESPACES", "NotUblInvoice", "is_ubl", "read_ubl", "ubl_facts"]

#: Root namespace -> (root element, syntax, line element, quantity element, type element).
UBL_NAMESPACES = {
    "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2": (
        "Invoice",
        "UBL-Invoice",
        "InvoiceLine",
        "InvoicedQuantity",
        "InvoiceTypeCode",
    ),
    "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2": (
        "CreditNote",
        "UBL-CreditNote",
        "CreditNoteLine",
        "CreditedQuantity",
        "CreditNoteTypeCode",
    ),
}
_PREFIXES = (
    ("xsd:Invoice-2", "ubl"),
    ("xsd:CreditNote-2", "ubl"),
    ("CommonAggregateComponents", "cac"),
    ("CommonBasicComponents", "cbc"),
    ("CommonExtensionComponents", "ext"),
)
#: An IBAN's shape: country, check digits, up to 30 letters or digits (checked by validation).
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{8,30}")


class NotUblInvoice(NotAnEInvoice):
    """The XML is not a UBL Invoice or CreditNote."""


def is_ubl(root: ET.Element) -> bool:
    """Whether a parsed root is a UBL Invoice or CreditNote (by its namespace and name)."""
    known = UBL_NAMESPACES.get(namespace(root.tag))
    return known is not None and known[0] == local(root.tag)


def read_ubl(xml: bytes) -> InvoiceFacts:
    """Read one UBL 2.1 invoice or credit note (Peppol BIS 3, XRechnung UBL, EN 16931).

    Raises:
        NotUblInvoice: the bytes are no XML (or declare a DTD), or its root is not a UBL
            Invoice or CreditNote.
    """
    try:
        root = parse_xml(xml)
    except NotAnEInvoice as exc:
        raise NotUblInvoice(str(exc)) from exc
    return ubl_facts(root)


def _date(el: ET.Element | None) -> date | None:
    """An ISO date (``xsd:date``: ``2013-06-30``, maybe with a time zone after it)."""
    value = text(el)
    if value is None:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def _item(el: ET.Element, quantity_name: str, line_name: str, where: XmlPaths) -> ItemFacts:
    item = child(el, "Item")
    price = child(el, "Price")
    subs = list(children(el, f"Sub{line_name}"))
    return ItemFacts(
        name=text(child(item, "Name")) or "",
        quantity=decimal(child(el, quantity_name)),
        unit_price=decimal(child(price, "PriceAmount")),
        basis_quantity=decimal(child(price, "BaseQuantity")),
        line_amount=decimal(child(el, "LineExtensionAmount")),
        tax_rate=decimal(path(item, "ClassifiedTaxCategory", "Percent")),
        allowances_charges=tuple(_allowance(a, where) for a in children(el, "AllowanceCharge")),
        line_status="GROUP" if subs else None,
        path=where(el),
        tax_category=text(path(item, "ClassifiedTaxCategory", "ID")),
    )


def _tax(el: ET.Element, where: XmlPaths) -> TaxFacts:
    category = child(el, "TaxCategory")
    return TaxFacts(
        rate=decimal(child(category, "Percent")),
        base=decimal(child(el, "TaxableAmount")),
        amount=decimal(child(el, "TaxAmount")),
        category=text(child(category, "ID")),
        path=where(el),
    )


def _allowance(el: ET.Element, where: XmlPaths) -> AllowanceFacts:
    category = child(el, "TaxCategory")
    return AllowanceFacts(
        charge=indicator(text(child(el, "ChargeIndicator"))),
        amount=decimal(child(el, "Amount")),
        tax_rate=decimal(child(category, "Percent")),
        tax_category=text(child(category, "ID")),
        reason=text(child(el, "AllowanceChargeReason")),
        reason_code=text(child(el, "AllowanceChargeReasonCode")),
        path=where(el),
    )


def _preceding(el: ET.Element, where: XmlPaths) -> PrecedingFacts:
    """A ``cac:InvoiceDocumentReference`` of a ``cac:BillingReference`` (BG-3)."""
    number = child(el, "ID")
    return PrecedingFacts(
        number=text(number),
        issue_date=_date(child(el, "IssueDate")),
        path=where(number if number is not None else el),
    )


def _scheme(party_tax_scheme: ET.Element) -> str:
    return (text(path(party_tax_scheme, "TaxScheme", "ID")) or "").upper()


def _iban(account: ET.Element | None) -> str | None:
    value = (text(child(account, "ID")) or "").replace(" ", "").upper()
    return value if _IBAN.fullmatch(value) else None


def _other_accounts(means: list[ET.Element], where: XmlPaths) -> tuple[AccountFacts, ...]:
    """The payee accounts (BT-84) that are no IBAN, with the scheme that names them: the
    ID's ``schemeID``, else the bank branch's ID (Peppol's ``SE:BANKGIRO``, a BIC)."""
    out = []
    for m in means:
        account = child(m, "PayeeFinancialAccount")
        value = text(id_el := child(account, "ID"))
        if value is None or id_el is None or _iban(account) is not None:
            continue
        scheme = id_el.get("schemeID") or text(path(account, "FinancialInstitutionBranch", "ID"))
        out.append(AccountFacts(value, scheme, where(id_el)))
    return tuple(out)


def _named_accounts(means: list[ET.Element]) -> tuple[str, ...]:
    """The payee accounts that are no IBAN as a reviewer reads them: each with the scheme
    or bank that names it, else its payment means code (``3338929 (bank SE:PLUSGIRO)``)."""
    out = []
    for m in means:
        account = child(m, "PayeeFinancialAccount")
        value = text(id_el := child(account, "ID"))
        if value is None or _iban(account) is not None:
            continue
        scheme = id_el.get("schemeID") if id_el is not None else None
        branch = text(path(account, "FinancialInstitutionBranch", "ID"))
        named = (
            f"scheme {scheme}"
            if scheme
            else f"bank {branch}"
            if branch
            else f"payment means {text(child(m, 'PaymentMeansCode')) or '?'}"
        )
        out.append(f"{value} ({named})")
    return tuple(out)


def ubl_facts(root: ET.Element) -> InvoiceFacts:
    """The facts of a parsed UBL Invoice or CreditNote.

    Raises:
        NotUblInvoice: the root is not a UBL Invoice or CreditNote.
    """
    if not is_ubl(root):
        raise NotUblInvoice(f"root element {root.tag!r} is not a UBL Invoice or CreditNote")
    _, syntax, line_name, quantity_name, type_name = UBL_NAMESPACES[namespace(root.tag)]
    where = XmlPaths(root, _PREFIXES)
    seller = path(root, "AccountingSupplierParty", "Party")
    schemes = list(children(seller, "PartyTaxScheme"))
    vat = next((child(s, "CompanyID") for s in schemes if _scheme(s) == "VAT"), None)
    # BT-32: the first registration other than VAT that names one (a statement such as
    # Sweden's "Godkänd för F-skatt" identifies no seller: names_a_registration).
    tax_number = next(
        (
            company
            for s in schemes
            if _scheme(s) != "VAT"
            and (company := child(s, "CompanyID")) is not None
            and names_a_registration(company.text or "")
        ),
        None,
    )
    seller_name = path(seller, "PartyLegalEntity", "RegistrationName")
    currency_el = child(root, "DocumentCurrencyCode")
    currency = text(currency_el)
    totals = child(root, "LegalMonetaryTotal")
    tax_totals = list(children(root, "TaxTotal"))
    tax_amounts = [a for t in tax_totals if (a := child(t, "TaxAmount")) is not None]
    tax_total = next(
        (a for a in tax_amounts if currency is not None and a.get("currencyID") == currency),
        tax_amounts[0] if tax_amounts else None,
    )
    tax_currency_el = child(root, "TaxCurrencyCode")
    tax_currency = text(tax_currency_el)
    in_tax_currency = [
        a
        for a in tax_amounts
        if tax_currency not in (None, currency) and a.get("currencyID") == tax_currency
    ]
    means = list(children(root, "PaymentMeans"))
    means_codes = [el for m in means if text(el := child(m, "PaymentMeansCode"))]
    accounts = [
        (iban, account)
        for m in means
        if (iban := _iban(account := child(m, "PayeeFinancialAccount"))) is not None
    ]
    mandates = [m for pm in means if (m := child(pm, "PaymentMandate")) is not None]
    mandate_ids = [el for m in mandates if text(el := child(m, "ID"))]
    debited = [el for m in mandates if text(el := path(m, "PayerFinancialAccount", "ID"))]
    due_el = child(root, "DueDate")
    if due_el is None:  # a CreditNote states its due date with the payment means
        due_el = next((d for m in means if (d := child(m, "PaymentDueDate")) is not None), None)
    terms = [n for t in children(root, "PaymentTerms") for n in children(t, "Note")]
    type_el = child(root, type_name)
    type_code = text(type_el)
    if type_code is None and syntax == "UBL-CreditNote":
        type_code = CREDIT_NOTE
    sources = {
        "invoice_number": child(root, "ID"),
        "issue_date": child(root, "IssueDate"),
        "due_date": due_el if _date(due_el) is not None else None,
        "currency": currency_el,
        "supplier.name": seller_name,
        "supplier.vat_id": vat,
        "supplier.tax_number": tax_number,
        "iban": accounts[0][1] if accounts else None,
        "payment_terms": terms[0] if terms else None,
        "net_total": child(totals, "TaxExclusiveAmount"),
        "tax_total": tax_total,
        "gross_total": child(totals, "TaxInclusiveAmount"),
        "prepaid_amount": child(totals, "PrepaidAmount"),
        "rounding_amount": child(totals, "PayableRoundingAmount"),
        "amount_due": child(totals, "PayableAmount"),
        "tax_currency": tax_currency_el,
        "payment_means": means_codes[0] if means_codes else None,
        "mandate_reference": mandate_ids[0] if mandate_ids else None,
        "debited_account": debited[0] if debited else None,
        "tax_total_in_tax_currency": in_tax_currency[0] if len(in_tax_currency) == 1 else None,
    }
    return InvoiceFacts(
        syntax=syntax,
        guideline=text(child(root, "CustomizationID")) or "",
        type_code=type_code,
        invoice_number=text(child(root, "ID")),
        issue_date=_date(child(root, "IssueDate")),
        due_date=_date(due_el),
        currency=currency,
        tax_currency=tax_currency,
        seller_name=text(seller_name),
        seller_vat_id=text(vat),
        seller_tax_number=text(tax_number),
        ibans=tuple(iban for iban, _ in accounts),
        net_total=decimal(child(totals, "TaxExclusiveAmount")),
        tax_total=decimal(tax_total),
        tax_total_currencies=tuple(a.get("currencyID") or "" for a in tax_amounts),
        gross_total=decimal(child(totals, "TaxInclusiveAmount")),
        line_total=decimal(child(totals, "LineExtensionAmount")),
        charge_total=decimal(child(totals, "ChargeTotalAmount")),
        allowance_total=decimal(child(totals, "AllowanceTotalAmount")),
        prepaid=decimal(child(totals, "PrepaidAmount")),
        due_payable=decimal(child(totals, "PayableAmount")),
        rounding=decimal(child(totals, "PayableRoundingAmount")),
        payment_means=tuple(text(el) or "" for el in means_codes),
        mandate_reference=text(mandate_ids[0]) if mandate_ids else None,
        debited_account=(text(debited[0]) or "").replace(" ", "") if debited else None,
        payee_accounts=_named_accounts(means),
        stated_accounts=_other_accounts(means, where),
        tax_total_in_tax_currency=(
            decimal(in_tax_currency[0]) if len(in_tax_currency) == 1 else None
        ),
        document_allowances_charges=sum(1 for _ in children(root, "AllowanceCharge")),
        payment_terms=tuple(value for n in terms if (value := text(n)) is not None),
        items=tuple(_item(el, quantity_name, line_name, where) for el in children(root, line_name)),
        tax_lines=tuple(_tax(el, where) for t in tax_totals for el in children(t, "TaxSubtotal")),
        paths={name: where(el) for name, el in sources.items() if el is not None},
        stated_amounts=stated_amounts(
            root, in_tax_currency[0] if len(in_tax_currency) == 1 else None
        ),
        allowances_charges=tuple(_allowance(el, where) for el in children(root, "AllowanceCharge")),
        preceding_invoices=tuple(
            _preceding(el, where)
            for ref in children(root, "BillingReference")
            for el in children(ref, "InvoiceDocumentReference")
        ),
    )
