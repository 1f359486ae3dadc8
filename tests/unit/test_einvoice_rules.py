"""EN 16931's business rules on the XML path (issue 44): CEN's Schematron, compiled to
XSLT 2.0 and run by Saxon (pipeline/extraction/xml_schematron.py).

A fatal rule sends the invoice to review (``einvoice_invalid``, field ``rules``) naming
the rule ids and their messages; a warning does not review; XML that does not parse,
MINIMUM and BASIC WL (no EN 16931 invoices by design) and ZUGFeRD 1.0 are not checked.
The planted violations are made on vendored samples (tests/data/einvoices, their NOTICEs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.documents import pdf_attachments
from pipeline.extraction import read_einvoice
from pipeline.extraction.xml_schematron import (
    CII_RULES,
    MAX_DETAIL,
    UBL_RULES,
    _compiled,
    check_rules,
    warm_rules,
)
from pipeline.invoice import Reason, ReasonCode

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
UBL = DATA / "ubl" / "ubl-tc434-example1.xml"
CII = DATA / "payable" / "01.17a-INVOICE_uncefact.xml"
_UBL_LINE = b'<cbc:LineExtensionAmount currencyID="EUR">19.90</cbc:LineExtensionAmount>'
_CII_LINE = b"<ram:LineTotalAmount>288.79</ram:LineTotalAmount>"
_XRECHNUNG = (
    b"<ram:ID>urn:cen.eu:en16931:2017#compliant#urn:xeinkauf.de:kosit:xrechnung_3.0</ram:ID>"
)


def _rules_reasons(xml: bytes) -> list[Reason]:
    return [r for r in read_einvoice(xml).reasons if r.field == "rules"]


@pytest.mark.parametrize(("path", "rules"), [(UBL, UBL_RULES), (CII, CII_RULES)])
def test_a_valid_invoice_passes_the_rules_and_reads_unchanged(path: Path, rules: str) -> None:
    xml = path.read_bytes()
    check = check_rules(xml)
    assert check.rules == rules
    assert check.valid, check.failures
    assert _rules_reasons(xml) == []


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        (UBL, _UBL_LINE, _UBL_LINE.replace(b">19.90<", b">20.90<")),
        (CII, _CII_LINE, _CII_LINE.replace(b">288.79<", b">289.79<")),
    ],
    ids=["ubl", "cii"],
)
def test_a_line_amount_off_the_net_total_reviews_with_br_co_10(
    path: Path, old: bytes, new: bytes
) -> None:
    """One line's net amount a unit higher: the sum of the lines is no longer the
    invoice's line total (BT-106), EN 16931's BR-CO-10."""
    xml = path.read_bytes()
    assert xml.count(old) == 1
    planted = xml.replace(old, new)
    [reason] = _rules_reasons(planted)
    assert (reason.code, reason.rule) == (ReasonCode.EINVOICE_INVALID, "einvoice.rules")
    assert reason.detail.startswith("fails EN 16931 rules BR-CO-10")
    assert "[BR-CO-10]-Sum of Invoice line net amount" in reason.detail


def test_a_missing_seller_country_reviews_with_br_09() -> None:
    """The seller's country code removed (the UBL schema lets it be absent; EN 16931 not)."""
    xml = UBL.read_bytes()
    country = (
        b"<cac:Country>\n                    <cbc:IdentificationCode>NL</cbc:IdentificationCode>"
    )
    assert xml.count(country) >= 1
    planted = xml.replace(country, b"<cac:Country>", 1)
    [reason] = _rules_reasons(planted)
    assert "BR-09" in reason.detail.split(":")[0]
    assert [f.rule for f in check_rules(planted).fatal] == ["BR-09"]


def test_a_vendored_extended_sample_fails_its_charge_arithmetic() -> None:
    """intarsys' ZUGFeRD 2.0 EXTENDED ``Kostenrechnung`` as published: its document
    charges do not sum to the charge total it states (BR-CO-12), nor its VAT base
    (BR-S-08); the schema accepts it."""
    pdf = (DATA / "zugferd_2p0_EXTENDED_Kostenrechnung.pdf").read_bytes()
    ((_, xml),) = pdf_attachments(pdf).items()
    assert sorted(f.rule for f in check_rules(xml).fatal) == ["BR-CO-12", "BR-S-08"]
    [reason] = _rules_reasons(xml)
    assert reason.detail.startswith("fails EN 16931 rules BR-CO-12, BR-S-08 (")


def test_a_warning_is_kept_on_the_check_and_does_not_review() -> None:
    xml = (DATA / "ubl" / "04.01a-INVOICE_ubl.xml").read_bytes()
    check = check_rules(xml)
    assert check.valid and check.fatal == ()
    assert [f.flag for f in check.warnings] == ["warning"]
    assert _rules_reasons(xml) == []


@pytest.mark.parametrize(
    "guideline",
    [b"urn:factur-x.eu:1p0:minimum", b"urn:factur-x.eu:1p0:basicwl"],
    ids=["minimum", "basic-wl"],
)
def test_minimum_and_basic_wl_are_not_checked(guideline: bytes) -> None:
    """Not EN 16931 invoices by design: the rules would refuse what the profile omits."""
    xml = CII.read_bytes()
    assert xml.count(_XRECHNUNG) == 1
    profiled = xml.replace(_XRECHNUNG, b"<ram:ID>" + guideline + b"</ram:ID>")
    assert check_rules(profiled).rules is None
    assert check_rules(profiled).valid


def test_a_zugferd_1_document_is_not_checked() -> None:
    xml = b'<CrossIndustryDocument xmlns="urn:ferd:CrossIndustryDocument:invoice:1p0"/>'
    assert check_rules(xml).rules is None


@pytest.mark.parametrize(
    "xml",
    [b"<rsm:CrossIndustryInvoice", b"", b"\xff\xfe<"],
    ids=["truncated", "empty", "garbage"],
)
def test_unparsable_xml_is_a_failed_check_never_a_crash(xml: bytes) -> None:
    check = check_rules(xml)
    assert not check.valid and check.failures[0].rule == "XML"
    # read_einvoice refuses it before either check: one reason, on the document.
    reasons = read_einvoice(xml).reasons
    assert [(r.code, r.field) for r in reasons] == [(ReasonCode.EINVOICE_INVALID, "document")]


def test_the_reasons_detail_is_bounded() -> None:
    """Every line's amount changed: many failures, one bounded detail."""
    xml = UBL.read_bytes().replace(
        b'<cbc:LineExtensionAmount currencyID="EUR">',
        b'<cbc:LineExtensionAmount currencyID="EUR">1',
    )
    check = check_rules(xml)
    assert len(check.fatal) >= 1
    detail = check.detail()
    assert len(detail) <= MAX_DETAIL


def test_warming_compiles_each_stylesheet_once() -> None:
    """The driver warms them at start (Driver._warm), so no attempt pays for compiling."""
    warm_rules()
    compiled = _compiled.cache_info().currsize
    assert compiled == 2
    warm_rules()
    assert _compiled.cache_info().currsize == compiled
