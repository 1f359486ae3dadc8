"""A generated invoice as an e-invoice: its truth written as CII XML (Factur-X EN 16931).

The demo sends one of its invoices this way (:mod:`benchmarks.demo.documents`): the
XML states every field the truth holds, so the worker's e-invoice fast path reads it
without a model and validation decides it as it decides the page's reading. Only what
the pipeline's CII reader (:mod:`pipeline.extraction.cii`) reads is written, plus what
EN 16931 requires beside it (type code, buyer, tax category, both parties' countries), so
the XML passes EN 16931's rules as the worker checks them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date
from decimal import Decimal

from pipeline.invoice import Extraction

_NS = {
    "rsm": "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100",
    "ram": "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100",
    "udt": "urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100",
}
#: The EN 16931 (Factur-X/ZUGFeRD COMFORT) guideline: a profile with lines.
EN16931 = "urn:cen.eu:en16931:2017"
#: The buyer the demo's invoices are addressed to (the truth has no buyer).
BUYER = "Fenceline Demo Buyer"
#: Its country (EN 16931 BR-10, BR-11: every invoice states both parties' countries).
BUYER_COUNTRY = "DE"

for _prefix, _uri in _NS.items():
    ET.register_namespace(_prefix, _uri)


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


def _add(parent: ET.Element, path: str, text: str | None = None, **attrs: str) -> ET.Element:
    """The element at ``path`` (``a/b/c``) under ``parent``, created; ``text`` on the last."""
    el = parent
    for name in path.split("/"):
        el = ET.SubElement(el, _q(name))
    if text is not None:
        el.text = text
    for key, value in attrs.items():
        el.set(key, value)
    return el


def _day(parent: ET.Element, path: str, day: date) -> None:
    _add(parent, f"{path}/udt:DateTimeString", day.strftime("%Y%m%d"), format="102")


def _seller_country(e: Extraction) -> str:
    """The seller's country (BR-08, BR-09), which the truth does not hold: its VAT id's
    or IBAN's country prefix (Greece's VAT ids say ``EL``), else the buyer's."""
    for evidenced in (e.supplier.vat_id, e.iban):
        prefix = evidenced.value[:2].upper() if evidenced is not None else ""
        if prefix.isalpha() and len(prefix) == 2:
            return "GR" if prefix == "EL" else prefix
    return BUYER_COUNTRY


def _amount(value: Decimal) -> str:
    return format(value, "f")


def cii_xml(truth: Extraction, *, credits: str | None = None) -> bytes:
    """``truth`` as a CII invoice (type 380, EN 16931), UTF-8 with a declaration.

    With ``credits`` (an invoice number), a credit note instead (type 381) whose
    preceding invoice reference (BG-3, ``InvoiceReferencedDocument``) names it.

    Raises:
        ValueError: the truth lacks what an e-invoice must state (number, issue date,
            currency, totals, supplier name).
    """
    e = truth
    if (
        e.invoice_number is None
        or e.issue_date is None
        or e.currency is None
        or e.supplier.name is None
        or e.net_total is None
        or e.tax_total is None
        or e.gross_total is None
    ):
        raise ValueError("an e-invoice states its number, date, currency, supplier and totals")
    currency = e.currency.value
    root = ET.Element(_q("rsm:CrossIndustryInvoice"))
    context = _add(root, "rsm:ExchangedDocumentContext")
    _add(context, "ram:GuidelineSpecifiedDocumentContextParameter/ram:ID", EN16931)
    document = _add(root, "rsm:ExchangedDocument")
    _add(document, "ram:ID", e.invoice_number.value)
    _add(document, "ram:TypeCode", "380" if credits is None else "381")
    _day(document, "ram:IssueDateTime", e.issue_date.value)
    trade = _add(root, "rsm:SupplyChainTradeTransaction")
    for n, item in enumerate(e.line_items, start=1):
        line = _add(trade, "ram:IncludedSupplyChainTradeLineItem")
        _add(line, "ram:AssociatedDocumentLineDocument/ram:LineID", str(n))
        _add(line, "ram:SpecifiedTradeProduct/ram:Name", item.description)
        price = _add(line, "ram:SpecifiedLineTradeAgreement/ram:NetPriceProductTradePrice")
        _add(price, "ram:ChargeAmount", _amount(item.unit_price))
        delivery = _add(line, "ram:SpecifiedLineTradeDelivery")
        _add(delivery, "ram:BilledQuantity", _amount(item.quantity), unitCode="C62")
        settlement = _add(line, "ram:SpecifiedLineTradeSettlement")
        tax = _add(settlement, "ram:ApplicableTradeTax")
        _add(tax, "ram:TypeCode", "VAT")
        _add(tax, "ram:CategoryCode", item.tax_category or "S")
        if item.tax_rate is not None:  # category O states none (EN 16931 BR-O-05)
            _add(tax, "ram:RateApplicablePercent", _amount(item.tax_rate))
        summation = _add(settlement, "ram:SpecifiedTradeSettlementLineMonetarySummation")
        _add(summation, "ram:LineTotalAmount", _amount(item.line_amount))
    agreement = _add(trade, "ram:ApplicableHeaderTradeAgreement")
    seller = _add(agreement, "ram:SellerTradeParty")
    _add(seller, "ram:Name", e.supplier.name.value)
    _add(seller, "ram:PostalTradeAddress/ram:CountryID", _seller_country(e))
    if e.supplier.vat_id is not None:
        _add(seller, "ram:SpecifiedTaxRegistration/ram:ID", e.supplier.vat_id.value, schemeID="VA")
    buyer = _add(agreement, "ram:BuyerTradeParty")
    _add(buyer, "ram:Name", BUYER)
    _add(buyer, "ram:PostalTradeAddress/ram:CountryID", BUYER_COUNTRY)
    _add(trade, "ram:ApplicableHeaderTradeDelivery")
    settlement = _add(trade, "ram:ApplicableHeaderTradeSettlement")
    _add(settlement, "ram:InvoiceCurrencyCode", currency)
    if e.iban is not None:
        means = _add(settlement, "ram:SpecifiedTradeSettlementPaymentMeans")
        _add(means, "ram:TypeCode", "58")
        _add(means, "ram:PayeePartyCreditorFinancialAccount/ram:IBANID", e.iban.value)
    for t in e.tax_lines:
        tax = _add(settlement, "ram:ApplicableTradeTax")
        _add(tax, "ram:CalculatedAmount", _amount(t.amount))
        _add(tax, "ram:TypeCode", "VAT")
        _add(tax, "ram:BasisAmount", _amount(t.base))
        _add(tax, "ram:CategoryCode", t.tax_category or "S")
        if t.rate is not None:
            _add(tax, "ram:RateApplicablePercent", _amount(t.rate))
    if e.due_date is not None:
        _day(settlement, "ram:SpecifiedTradePaymentTerms/ram:DueDateDateTime", e.due_date.value)
    sums = _add(settlement, "ram:SpecifiedTradeSettlementHeaderMonetarySummation")
    lines = sum((i.line_amount for i in e.line_items), Decimal(0))
    _add(sums, "ram:LineTotalAmount", _amount(lines))
    _add(sums, "ram:TaxBasisTotalAmount", _amount(e.net_total.value))
    _add(sums, "ram:TaxTotalAmount", _amount(e.tax_total.value), currencyID=currency)
    _add(sums, "ram:GrandTotalAmount", _amount(e.gross_total.value))
    _add(sums, "ram:DuePayableAmount", _amount(e.gross_total.value))
    if credits is not None:
        _add(settlement, "ram:InvoiceReferencedDocument/ram:IssuerAssignedID", credits)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data
