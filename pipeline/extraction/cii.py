"""The truth of one e-invoice, read from its UN/CEFACT Cross Industry Invoice XML.

Factur-X and ZUGFeRD 2.x embed ``CrossIndustryInvoice`` (D16B); ZUGFeRD 1.0 embeds the
older ``CrossIndustryDocument`` (D13B), whose elements carry the same local names in
other wrappers (``SpecifiedSupplyChainTradeAgreement`` where 2.x says
``SpecifiedLineTradeAgreement``, ``ApplicablePercent`` for ``RateApplicablePercent``).
The reader therefore matches *local names* and accepts either wrapper, and reads both
versions into one :class:`InvoiceFacts`.

The facts (:mod:`pipeline.extraction.einvoice_facts`) are the same the UBL reader
(:mod:`pipeline.extraction.ubl`) gives; each field read keeps the XML path it was read
from (``paths``), the evidence of a value read without a model. This is the one CII
reader: the worker's e-invoice fast path and the corpus evaluation's truth
(``benchmarks/corpus``) both read through it.

The bytes come from uploads: they are parsed by
:func:`~pipeline.extraction.xml_tree.parse_xml`, which refuses a document type
declaration (DTD, entities) before parsing, so no entity is expanded and nothing
outside the bytes is fetched.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date

from pipeline.extraction.einvoice_facts import (
    CREDIT_NOTE_TYPES,
    AccountFacts,
    AllowanceFacts,
    InvoiceFacts,
    ItemFacts,
    PrecedingFacts,
    TaxFacts,
    due_date_from_terms,
    indicator,
)
from pipeline.extraction.xml_tree import NotAnEInvoice, XmlPaths, parse_xml, stated_amounts
from pipeline.extraction.xml_tree import child as _child
from pipeline.extraction.xml_tree import children as _children
from pipeline.extraction.xml_tree import decimal as _decimal
from pipeline.extraction.xml_tree import local as _local
from pipeline.extraction.xml_tree import path as _path
from pipeline.extraction.xml_tree import text as _text
from pipeline.invoice import names_a_registration

__all__ = [
    "CREDIT_NOTE_TYPES",
    "InvoiceFacts",
    "ItemFacts",
    "NotCrossIndustryInvoice",
    "TaxFacts",
    "cii_facts",
    "due_date_from_terms",
    "read_cii",
]

#: Root element -> syntax. ``Invoice`` in the CBFBUY namespace is the ZUGFeRD 1.0 release
#: candidate (Mustang's 2014 samples): the 1.0 structure without the ram: prefix.
_SYNTAXES = {
    "CrossIndustryInvoice": "CII-D16B",
    "CrossIndustryDocument": "CII-D13B",
    "Invoice": "CII-CBFBUY",
}


class NotCrossIndustryInvoice(NotAnEInvoice):
    """The XML is not a CII invoice (another syntax, or not XML at all)."""


#: Conventional prefixes of the CII namespaces, by a word of their URI.
_PREFIXES = (
    ("CrossIndustryInvoice", "rsm"),
    ("CrossIndustryDocument", "rsm"),
    ("ReusableAggregateBusinessInformationEntity", "ram"),
    ("UnqualifiedDataType", "udt"),
    ("QualifiedDataType", "qdt"),
)


def _date(el: ET.Element | None) -> date | None:
    """A ``DateTimeString`` (format 102, ``YYYYMMDD``) or an ISO date (ZUGFeRD 1.0 samples)."""
    inner = _child(el, "DateTimeString")
    text = _text(inner if inner is not None else el)
    if text is None:
        return None
    digits = text[:10].replace("-", "")
    if len(digits) < 8 or not digits[:8].isdigit():
        return None
    try:
        return date(int(digits[:4]), int(digits[4:6]), int(digits[6:8]))
    except ValueError:
        return None


def _item(el: ET.Element, where: XmlPaths) -> ItemFacts:
    agreement = _child(el, "SpecifiedLineTradeAgreement", "SpecifiedSupplyChainTradeAgreement")
    delivery = _child(el, "SpecifiedLineTradeDelivery", "SpecifiedSupplyChainTradeDelivery")
    settlement = _child(el, "SpecifiedLineTradeSettlement", "SpecifiedSupplyChainTradeSettlement")
    price = _child(agreement, "NetPriceProductTradePrice")
    tax = _child(settlement, "ApplicableTradeTax")
    summation = _child(
        settlement,
        "SpecifiedTradeSettlementLineMonetarySummation",
        "SpecifiedTradeSettlementMonetarySummation",
    )
    product = _child(el, "SpecifiedTradeProduct")
    return ItemFacts(
        name=_text(_child(product, "Name")) or "",
        quantity=_decimal(_child(delivery, "BilledQuantity")),
        unit_price=_decimal(_child(price, "ChargeAmount")),
        basis_quantity=_decimal(_child(price, "BasisQuantity")),
        line_amount=_decimal(_child(summation, "LineTotalAmount")),
        tax_rate=_decimal(_child(tax, "RateApplicablePercent", "ApplicablePercent")),
        allowances_charges=tuple(
            _allowance(a, where) for a in _children(settlement, "SpecifiedTradeAllowanceCharge")
        ),
        line_status=_text(_path(el, "AssociatedDocumentLineDocument", "LineStatusReasonCode")),
        path=where(el),
        tax_category=_text(_child(tax, "CategoryCode")),
    )


def _is_note_line(el: ET.Element) -> bool:
    """A ZUGFeRD 1.0 free-text line: a note in the item list, with no product, price or amount."""
    return all(
        _child(el, name) is None
        for name in (
            "SpecifiedTradeProduct",
            "SpecifiedLineTradeAgreement",
            "SpecifiedSupplyChainTradeAgreement",
            "SpecifiedLineTradeDelivery",
            "SpecifiedSupplyChainTradeDelivery",
        )
    )


def _tax(el: ET.Element, where: XmlPaths) -> TaxFacts:
    return TaxFacts(
        rate=_decimal(_child(el, "RateApplicablePercent", "ApplicablePercent")),
        base=_decimal(_child(el, "BasisAmount")),
        amount=_decimal(_child(el, "CalculatedAmount")),
        category=_text(_child(el, "CategoryCode")),
        path=where(el),
    )


def _allowance(el: ET.Element, where: XmlPaths) -> AllowanceFacts:
    """A ``SpecifiedTradeAllowanceCharge``, or a ``SpecifiedLogisticsServiceCharge`` (a
    charge, ZUGFeRD 1.0 and EXTENDED)."""
    if _local(el.tag) == "SpecifiedLogisticsServiceCharge":
        tax = _child(el, "AppliedTradeTax")
        return AllowanceFacts(
            charge=True,
            amount=_decimal(_child(el, "AppliedAmount")),
            tax_rate=_decimal(_child(tax, "RateApplicablePercent", "ApplicablePercent")),
            tax_category=_text(_child(tax, "CategoryCode")),
            reason=_text(_child(el, "Description")),
            reason_code=None,
            path=where(el),
        )
    tax = _child(el, "CategoryTradeTax")
    return AllowanceFacts(
        charge=indicator(_text(_path(el, "ChargeIndicator", "Indicator"))),
        amount=_decimal(_child(el, "ActualAmount")),
        tax_rate=_decimal(_child(tax, "RateApplicablePercent", "ApplicablePercent")),
        tax_category=_text(_child(tax, "CategoryCode")),
        reason=_text(_child(el, "Reason")),
        reason_code=_text(_child(el, "ReasonCode")),
        path=where(el),
    )


def _preceding(el: ET.Element, where: XmlPaths) -> PrecedingFacts:
    """An ``InvoiceReferencedDocument`` of the header settlement (BG-3)."""
    number = _child(el, "IssuerAssignedID")
    return PrecedingFacts(
        number=_text(number),
        issue_date=_date(_child(el, "FormattedIssueDateTime")),
        path=where(number if number is not None else el),
    )


def _tax_total_element(summation: ET.Element | None, currency: str | None) -> ET.Element | None:
    """``TaxTotalAmount`` in the invoice currency: a second one may give it in the tax currency."""
    totals = list(_children(summation, "TaxTotalAmount"))
    for el in totals:
        if currency is not None and el.get("currencyID") == currency:
            return el
    return totals[0] if totals else None


_DECLARATIONS = ("<!DOCTYPE", "<!ENTITY")


def read_cii(xml: bytes) -> InvoiceFacts:
    """Read one CII invoice (ZUGFeRD 1.0, 2.x, Factur-X, XRechnung CII).

    Raises:
        NotCrossIndustryInvoice: the bytes are no XML (or declare a DTD), or its root is
            not a CII invoice.
    """
    try:
        root = parse_xml(xml)
    except NotAnEInvoice as exc:
        raise NotCrossIndustryInvoice(str(exc)) from exc
    return cii_facts(root)


def _registration(seller: ET.Element | None, scheme: str) -> ET.Element | None:
    """The seller's first ``SpecifiedTaxRegistration/ID`` of ``scheme`` (``VA``: the VAT
    id, BT-31; ``FC``: the tax number, BT-32, one with a digit in it:
    :func:`~pipeline.invoice.text.names_a_registration`)."""
    return next(
        (
            reg
            for reg in (_child(r, "ID") for r in _children(seller, "SpecifiedTaxRegistration"))
            if reg is not None
            and (reg.get("schemeID") or "").upper() == scheme
            and (scheme != "FC" or names_a_registration(reg.text or ""))
        ),
        None,
    )


def cii_facts(root: ET.Element) -> InvoiceFacts:
    """The facts of a parsed CII invoice (:func:`~pipeline.extraction.xml_tree.parse_xml`).

    Raises:
        NotCrossIndustryInvoice: the root is not a CII invoice.
    """
    kind = _local(root.tag)
    syntax = _SYNTAXES.get(kind)
    if kind == "Invoice" and "CBFBUY" not in root.tag:
        syntax = None  # UBL's Invoice, not the ZUGFeRD release candidate's
    if syntax is None:
        raise NotCrossIndustryInvoice(f"root element {root.tag!r} is not a CII invoice")
    where = XmlPaths(root, _PREFIXES)
    context = _child(root, "ExchangedDocumentContext", "SpecifiedExchangedDocumentContext")
    document = _child(root, "ExchangedDocument", "HeaderExchangedDocument")
    trade = _child(root, "SupplyChainTradeTransaction", "SpecifiedSupplyChainTradeTransaction")
    agreement = _child(
        trade, "ApplicableHeaderTradeAgreement", "ApplicableSupplyChainTradeAgreement"
    )
    settlement = _child(
        trade, "ApplicableHeaderTradeSettlement", "ApplicableSupplyChainTradeSettlement"
    )
    seller = _child(agreement, "SellerTradeParty")
    registrations = {scheme: _text(_registration(seller, scheme)) for scheme in ("VA", "FC")}
    summation = _child(
        settlement,
        "SpecifiedTradeSettlementHeaderMonetarySummation",
        "SpecifiedTradeSettlementMonetarySummation",
    )
    currency = _text(_child(settlement, "InvoiceCurrencyCode"))
    means_codes = [
        el
        for means in _children(settlement, "SpecifiedTradeSettlementPaymentMeans")
        if _text(el := _child(means, "TypeCode"))
    ]
    iban_elements = [
        el
        for means in _children(settlement, "SpecifiedTradeSettlementPaymentMeans")
        if _text(el := _path(means, "PayeePartyCreditorFinancialAccount", "IBANID"))
    ]
    ibans = tuple((_text(el) or "").replace(" ", "").upper() for el in iban_elements)
    proprietary = [
        (means, el)
        for means in _children(settlement, "SpecifiedTradeSettlementPaymentMeans")
        if (el := _path(means, "PayeePartyCreditorFinancialAccount", "ProprietaryID")) is not None
        and _text(el)
        and not _text(_path(means, "PayeePartyCreditorFinancialAccount", "IBANID"))
    ]
    other_accounts = tuple(
        f"{_text(el)} (payment means {_text(_child(means, 'TypeCode')) or '?'})"
        for means, el in proprietary
    )
    # CII names an account's scheme only by ProprietaryID's schemeID (SE:BANKGIRO):
    # without one the scheme is None, which the supplier register cannot hold, so such
    # an account reviews as before (payee_account_not_iban).
    stated_accounts = tuple(
        AccountFacts(_text(el) or "", el.get("schemeID"), where(el)) for _, el in proprietary
    )
    debited = [
        el
        for means in _children(settlement, "SpecifiedTradeSettlementPaymentMeans")
        if _text(el := _path(means, "PayerPartyDebtorFinancialAccount", "IBANID"))
    ]
    terms = list(_children(settlement, "SpecifiedTradePaymentTerms"))
    mandates = [el for t in terms if _text(el := _child(t, "DirectDebitMandateID"))]
    due_elements = [
        (d, el) for t in terms if (d := _date(el := _child(t, "DueDateDateTime"))) is not None
    ]
    due_dates = [d for d, _ in due_elements]
    tax_total = _tax_total_element(summation, currency)
    tax_currency_el = _child(settlement, "TaxCurrencyCode")
    tax_currency = _text(tax_currency_el)
    in_tax_currency = [
        el
        for el in _children(summation, "TaxTotalAmount")
        if tax_currency not in (None, currency) and el.get("currencyID") == tax_currency
    ]
    sources = {
        "invoice_number": _child(document, "ID"),
        "issue_date": _child(document, "IssueDateTime"),
        "due_date": min(due_elements, key=lambda de: de[0])[1] if due_elements else None,
        "currency": _child(settlement, "InvoiceCurrencyCode"),
        "supplier.name": _child(seller, "Name"),
        "supplier.vat_id": _registration(seller, "VA"),
        "supplier.tax_number": _registration(seller, "FC"),
        "iban": iban_elements[0] if iban_elements else None,
        "payment_terms": next(
            (desc for t in terms if (desc := _child(t, "Description")) is not None), None
        ),
        "net_total": _child(summation, "TaxBasisTotalAmount"),
        "tax_total": tax_total,
        "gross_total": _child(summation, "GrandTotalAmount"),
        "prepaid_amount": _child(summation, "TotalPrepaidAmount"),
        "rounding_amount": _child(summation, "RoundingAmount"),
        "amount_due": _child(summation, "DuePayableAmount"),
        "tax_currency": tax_currency_el,
        "payment_means": means_codes[0] if means_codes else None,
        "mandate_reference": mandates[0] if mandates else None,
        "debited_account": debited[0] if debited else None,
        "tax_total_in_tax_currency": in_tax_currency[0] if len(in_tax_currency) == 1 else None,
    }
    return InvoiceFacts(
        syntax=syntax,
        guideline=_text(_path(context, "GuidelineSpecifiedDocumentContextParameter", "ID")) or "",
        type_code=_text(_child(document, "TypeCode")),
        invoice_number=_text(_child(document, "ID")),
        issue_date=_date(_child(document, "IssueDateTime")),
        due_date=min(due_dates) if due_dates else None,
        currency=currency,
        tax_currency=tax_currency,
        seller_name=_text(_child(seller, "Name")),
        seller_vat_id=registrations.get("VA"),
        seller_tax_number=registrations.get("FC"),
        ibans=ibans,
        net_total=_decimal(_child(summation, "TaxBasisTotalAmount")),
        tax_total=_decimal(tax_total),
        tax_total_currencies=tuple(
            el.get("currencyID") or "" for el in _children(summation, "TaxTotalAmount")
        ),
        gross_total=_decimal(_child(summation, "GrandTotalAmount")),
        line_total=_decimal(_child(summation, "LineTotalAmount")),
        charge_total=_decimal(_child(summation, "ChargeTotalAmount")),
        allowance_total=_decimal(_child(summation, "AllowanceTotalAmount")),
        prepaid=_decimal(_child(summation, "TotalPrepaidAmount")),
        due_payable=_decimal(_child(summation, "DuePayableAmount")),
        rounding=_decimal(_child(summation, "RoundingAmount")),
        payment_means=tuple(_text(el) or "" for el in means_codes),
        mandate_reference=_text(mandates[0]) if mandates else None,
        debited_account=(_text(debited[0]) or "").replace(" ", "") if debited else None,
        payee_accounts=other_accounts,
        stated_accounts=stated_accounts,
        tax_total_in_tax_currency=(
            _decimal(in_tax_currency[0]) if len(in_tax_currency) == 1 else None
        ),
        document_allowances_charges=sum(
            1
            for _ in _children(
                settlement, "SpecifiedTradeAllowanceCharge", "SpecifiedLogisticsServiceCharge"
            )
        ),
        payment_terms=tuple(
            text for t in terms if (text := _text(_child(t, "Description"))) is not None
        ),
        items=tuple(
            _item(el, where)
            for el in _children(trade, "IncludedSupplyChainTradeLineItem")
            if not _is_note_line(el)
        ),
        tax_lines=tuple(_tax(el, where) for el in _children(settlement, "ApplicableTradeTax")),
        paths={name: where(el) for name, el in sources.items() if el is not None},
        stated_amounts=stated_amounts(
            root, in_tax_currency[0] if len(in_tax_currency) == 1 else None
        ),
        allowances_charges=tuple(
            _allowance(el, where)
            for el in _children(
                settlement, "SpecifiedTradeAllowanceCharge", "SpecifiedLogisticsServiceCharge"
            )
        ),
        preceding_invoices=tuple(
            _preceding(el, where) for el in _children(settlement, "InvoiceReferencedDocument")
        ),
    )
