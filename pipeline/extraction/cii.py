"""The truth of one e-invoice, read from its UN/CEFACT Cross Industry Invoice XML.

Factur-X and ZUGFeRD 2.x embed ``CrossIndustryInvoice`` (D16B); ZUGFeRD 1.0 embeds the
older ``CrossIndustryDocument`` (D13B), whose elements carry the same local names in
other wrappers (``SpecifiedSupplyChainTradeAgreement`` where 2.x says
``SpecifiedLineTradeAgreement``, ``ApplicablePercent`` for ``RateApplicablePercent``).
The reader therefore matches *local names* and accepts either wrapper, and reads both
versions into one :class:`InvoiceFacts`.

The facts hold more than the evaluation's truth: the document type, allowances and
charges, price basis quantities and currencies are what decides whether extraction
contract v2 can hold the invoice at all (:mod:`pipeline.extraction.einvoice`). Each
field read keeps the XML path it was read from (``paths``), the evidence of a value
read without a model. This is the one CII reader: the worker's e-invoice fast path and
the corpus evaluation's truth (``benchmarks/corpus``) both read through it.

The bytes come from uploads: a document type declaration (DTD, entities) is refused
before parsing, so no entity is expanded and nothing outside the bytes is fetched.

ElementTree's elements without children are *falsy*: every lookup here compares with
``None``, never chains ``find(a) or find(b)``.

One concept over 450 lines: one format's reader, its paths and their evidence; split,
the two CII versions' wrappers would have to be known in two places.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation

_PROFILE_NAMES = (  # checked in this order: "basicwl" before "basic", "xrechnung" first
    ("xrechnung", "XRECHNUNG"),
    ("minimum", "MINIMUM"),
    ("basicwl", "BASIC-WL"),
    ("basic", "BASIC"),
    ("extended", "EXTENDED"),
    ("comfort", "COMFORT"),
    ("en16931", "EN16931"),
)
#: Root element -> syntax. ``Invoice`` in the CBFBUY namespace is the ZUGFeRD 1.0 release
#: candidate (Mustang's 2014 samples): the 1.0 structure without the ram: prefix.
_SYNTAXES = {
    "CrossIndustryInvoice": "CII-D16B",
    "CrossIndustryDocument": "CII-D13B",
    "Invoice": "CII-CBFBUY",
}
#: Document type codes (UNTDID 1001) of credit notes: the amounts are owed to the buyer.
CREDIT_NOTE_TYPES = frozenset({"81", "83", "261", "262", "296", "308", "381", "396", "420", "532"})


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


class NotCrossIndustryInvoice(ValueError):
    """The XML is not a CII invoice (another syntax, or not XML at all)."""


@dataclass(frozen=True)
class ItemFacts:
    """One ``IncludedSupplyChainTradeLineItem`` as the XML states it (``None``: absent)."""

    name: str
    quantity: Decimal | None
    unit_price: Decimal | None  # NetPriceProductTradePrice/ChargeAmount: per basis_quantity
    basis_quantity: Decimal | None
    line_amount: Decimal | None
    tax_rate: Decimal | None
    allowances_charges: int  # item-level allowances/charges (not those inside the price)
    line_status: str | None  # EXTENDED sub-lines: DETAIL / GROUP / INFORMATION
    path: str = ""  # the line item's XML path


@dataclass(frozen=True)
class TaxFacts:
    """One header ``ApplicableTradeTax``."""

    rate: Decimal | None
    base: Decimal | None
    amount: Decimal | None
    category: str | None
    path: str = ""  # the ApplicableTradeTax's XML path


@dataclass(frozen=True)
class InvoiceFacts:
    """What the XML says about one invoice, and what decides whether v2 can hold it."""

    syntax: str  # CII-D16B (ZUGFeRD 2.x, Factur-X), CII-D13B (ZUGFeRD 1.0), CII-CBFBUY (1.0 RC)
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
    net_total: Decimal | None  # TaxBasisTotalAmount
    tax_total: Decimal | None  # TaxTotalAmount in the invoice currency
    tax_total_currencies: tuple[str, ...]
    gross_total: Decimal | None  # GrandTotalAmount
    line_total: Decimal | None
    charge_total: Decimal | None
    allowance_total: Decimal | None
    prepaid: Decimal | None
    due_payable: Decimal | None
    document_allowances_charges: int  # header allowances, charges and logistics charges
    payment_terms: tuple[str, ...]
    items: tuple[ItemFacts, ...] = field(default=())
    tax_lines: tuple[TaxFacts, ...] = field(default=())
    #: The XML path each header field was read from (``invoice_number``, ``gross_total``...).
    paths: Mapping[str, str] = field(default_factory=dict)

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
    def iban(self) -> str | None:
        return self.ibans[0] if self.ibans else None


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


#: Conventional prefixes of the CII namespaces, by a word of their URI.
_PREFIXES = (
    ("CrossIndustryInvoice", "rsm"),
    ("CrossIndustryDocument", "rsm"),
    ("ReusableAggregateBusinessInformationEntity", "ram"),
    ("UnqualifiedDataType", "udt"),
    ("QualifiedDataType", "qdt"),
)


def _prefixed(tag: object) -> str:
    name = _local(tag)
    uri = tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""
    prefix = next((p for word, p in _PREFIXES if word in uri), "")
    return f"{prefix}:{name}" if prefix else name


class _Paths:
    """XML paths of a tree's elements (``/rsm:CrossIndustryInvoice/.../ram:ID``)."""

    def __init__(self, root: ET.Element) -> None:
        self.root = root
        self.parents = {child: parent for parent in root.iter() for child in parent}

    def __call__(self, el: ET.Element | None) -> str:
        if el is None:
            return ""
        steps: list[str] = []
        while el is not None:
            step = _prefixed(el.tag)
            parent = self.parents.get(el)
            if parent is not None:
                same = [c for c in parent if c.tag == el.tag]
                if len(same) > 1:
                    step += f"[{same.index(el) + 1}]"
            steps.append(step)
            el = parent
        return "/" + "/".join(reversed(steps))


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _children(el: ET.Element | None, *names: str) -> Iterator[ET.Element]:
    if el is None:
        return
    for child in el:
        if _local(child.tag) in names:
            yield child


def _child(el: ET.Element | None, *names: str) -> ET.Element | None:
    """The first child whose local name is one of ``names`` (``None`` when there is none)."""
    return next(_children(el, *names), None)


def _path(el: ET.Element | None, *steps: tuple[str, ...] | str) -> ET.Element | None:
    """Follow child steps; a step is one local name or a tuple of alternatives."""
    for step in steps:
        el = _child(el, *((step,) if isinstance(step, str) else step))
        if el is None:
            return None
    return el


def _text(el: ET.Element | None) -> str | None:
    if el is None or el.text is None:
        return None
    text = " ".join(el.text.split())
    return text or None


def _decimal(el: ET.Element | None) -> Decimal | None:
    text = _text(el)
    if text is None:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


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


def _item(el: ET.Element, where: _Paths) -> ItemFacts:
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
        allowances_charges=sum(1 for _ in _children(settlement, "SpecifiedTradeAllowanceCharge")),
        line_status=_text(_path(el, "AssociatedDocumentLineDocument", "LineStatusReasonCode")),
        path=where(el),
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


def _tax(el: ET.Element, where: _Paths) -> TaxFacts:
    return TaxFacts(
        rate=_decimal(_child(el, "RateApplicablePercent", "ApplicablePercent")),
        base=_decimal(_child(el, "BasisAmount")),
        amount=_decimal(_child(el, "CalculatedAmount")),
        category=_text(_child(el, "CategoryCode")),
        path=where(el),
    )


def _tax_total_element(summation: ET.Element | None, currency: str | None) -> ET.Element | None:
    """``TaxTotalAmount`` in the invoice currency: a second one may give it in the tax currency."""
    totals = list(_children(summation, "TaxTotalAmount"))
    for el in totals:
        if currency is not None and el.get("currencyID") == currency:
            return el
    return totals[0] if totals else None


_DECLARATIONS = ("<!DOCTYPE", "<!ENTITY")


def _declares(xml: bytes) -> bool:
    """Whether the bytes hold a DTD or entity declaration, in any encoding XML allows."""
    for marker in _DECLARATIONS:
        for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            if marker.encode(codec) in xml:
                return True
    return False


def parse_xml(xml: bytes) -> ET.Element:
    """The root of ``xml``, refusing a DTD or entity declarations (no expansion, no fetch).

    Raises:
        NotCrossIndustryInvoice: a declaration, or no well-formed XML (the parser's message).
    """
    if _declares(xml):
        raise NotCrossIndustryInvoice("XML with a document type or entity declaration is refused")
    try:
        return ET.fromstring(xml)
    except ET.ParseError as exc:
        raise NotCrossIndustryInvoice(f"not XML: {exc}") from exc


def read_cii(xml: bytes) -> InvoiceFacts:
    """Read one CII invoice (ZUGFeRD 1.0, 2.x, Factur-X, XRechnung CII).

    Raises:
        NotCrossIndustryInvoice: the bytes are no XML (or declare a DTD), or its root is
            not a CII invoice.
    """
    root = parse_xml(xml)
    kind = _local(root.tag)
    syntax = _SYNTAXES.get(kind)
    if kind == "Invoice" and "CBFBUY" not in root.tag:
        syntax = None  # UBL's Invoice, not the ZUGFeRD release candidate's
    if syntax is None:
        raise NotCrossIndustryInvoice(f"root element {root.tag!r} is not a CII invoice")
    where = _Paths(root)
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
    registrations = {
        (reg.get("schemeID") or "").upper(): _text(reg)
        for reg in (_child(r, "ID") for r in _children(seller, "SpecifiedTaxRegistration"))
        if reg is not None
    }
    summation = _child(
        settlement,
        "SpecifiedTradeSettlementHeaderMonetarySummation",
        "SpecifiedTradeSettlementMonetarySummation",
    )
    currency = _text(_child(settlement, "InvoiceCurrencyCode"))
    iban_elements = [
        el
        for means in _children(settlement, "SpecifiedTradeSettlementPaymentMeans")
        if _text(el := _path(means, "PayeePartyCreditorFinancialAccount", "IBANID"))
    ]
    ibans = tuple((_text(el) or "").replace(" ", "").upper() for el in iban_elements)
    terms = list(_children(settlement, "SpecifiedTradePaymentTerms"))
    due_elements = [
        (d, el) for t in terms if (d := _date(el := _child(t, "DueDateDateTime"))) is not None
    ]
    due_dates = [d for d, _ in due_elements]
    tax_total = _tax_total_element(summation, currency)
    sources = {
        "invoice_number": _child(document, "ID"),
        "issue_date": _child(document, "IssueDateTime"),
        "due_date": min(due_elements, key=lambda de: de[0])[1] if due_elements else None,
        "currency": _child(settlement, "InvoiceCurrencyCode"),
        "supplier.name": _child(seller, "Name"),
        "supplier.vat_id": next(
            (
                reg
                for reg in (_child(r, "ID") for r in _children(seller, "SpecifiedTaxRegistration"))
                if reg is not None and (reg.get("schemeID") or "").upper() == "VA"
            ),
            None,
        ),
        "iban": iban_elements[0] if iban_elements else None,
        "payment_terms": next(
            (desc for t in terms if (desc := _child(t, "Description")) is not None), None
        ),
        "net_total": _child(summation, "TaxBasisTotalAmount"),
        "tax_total": tax_total,
        "gross_total": _child(summation, "GrandTotalAmount"),
    }
    return InvoiceFacts(
        syntax=syntax,
        guideline=_text(_path(context, "GuidelineSpecifiedDocumentContextParameter", "ID")) or "",
        type_code=_text(_child(document, "TypeCode")),
        invoice_number=_text(_child(document, "ID")),
        issue_date=_date(_child(document, "IssueDateTime")),
        due_date=min(due_dates) if due_dates else None,
        currency=currency,
        tax_currency=_text(_child(settlement, "TaxCurrencyCode")),
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
    )
