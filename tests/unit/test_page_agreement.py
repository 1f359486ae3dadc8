"""The page of a Factur-X/ZUGFeRD PDF cross-checked with its XML (issue 44): a page that
prints what the XML states agrees however it spells it; a page that says otherwise goes
to review with ``xml_text_mismatch`` naming the fields.

The pages are the vendored samples' own text (tests/data/einvoices, see its NOTICE),
changed where a test plants a disagreement.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pipeline.documents import pdf_attachments, read_pdf_text
from pipeline.extraction import read_cii
from pipeline.extraction.page_agreement import currency_printed, page_mismatches
from pipeline.invoice import ReasonCode

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
MUSTANG = "MustangGnuaccountingBeispielRE-20190610_507.pdf"
XRECHNUNG = "XRECHNUNG_Einfach.pdf"


def _xml_and_page(name: str) -> tuple[bytes, str]:
    data = (DATA / name).read_bytes()
    ((_, xml),) = pdf_attachments(data).items()
    return xml, "\f".join(p.laid_out().text for p in read_pdf_text(data, max_pages=20).pages)


def _mismatched(xml: bytes, page: str) -> list[str]:
    reasons = page_mismatches(read_cii(xml), page)
    assert all(r.code is ReasonCode.XML_TEXT_MISMATCH for r in reasons)
    return [field for r in reasons for field in r.field.split(", ")]


def test_the_vendored_pages_agree_with_their_xml() -> None:
    for name in (MUSTANG, XRECHNUNG):
        assert _mismatched(*_xml_and_page(name)) == [], name


def test_a_currency_printed_only_as_a_column_unit_is_printed() -> None:
    """`ZUGFeRDv1/correct/Konik/acme_invoice-42_ZUGFeRD.pdf` prints its euros once, in
    the headers "Einzel/€" and "Gesamt/€", and never beside an amount."""
    xml, page = _xml_and_page(MUSTANG)
    bare = page.replace(" €", "").replace("Total", "Total/€")
    assert "€" in bare and "EUR" not in bare
    assert _mismatched(xml, bare) == []
    assert currency_printed("EUR", "Menge   Einzel/€   Gesamt/€")
    assert currency_printed("EUR", "Betrag (€)")
    # Another currency's unit, or the sign inside a word, prints no euros.
    assert not currency_printed("EUR", "Menge   Einzel/£   Gesamt/£")
    assert not currency_printed("USD", "Menge   Einzel/€")
    assert _mismatched(xml, page.replace(" €", "")) == ["currency"]


def test_an_iban_the_page_prints_once_must_be_the_xmls() -> None:
    xml, page = _xml_and_page(MUSTANG)  # the XML writes "DE88 2008 0000 0970 3757 00"
    assert "DE88200800000970375700" in page
    other = xml.replace(b"DE88 2008 0000 0970 3757 00", b"DE02 1203 0000 0000 2020 51")
    assert _mismatched(other, page) == ["iban"]
    # Printed in groups of four, it is the same account.
    grouped = page.replace("DE88200800000970375700", "DE88 2008 0000 0970 3757 00")
    assert _mismatched(xml, grouped) == []
    # Two accounts on the page prove neither: the IBAN is not compared.
    two = page.replace("BIC COBADEFFXXX", "IBAN DE02120300000000202051")
    assert _mismatched(other, two) == []
    # Nor where the page prints no IBAN at all.
    assert _mismatched(other, page.replace("DE88200800000970375700", "")) == []


def test_a_due_date_the_page_labels_must_be_the_xmls() -> None:
    xml, page = _xml_and_page(MUSTANG)  # "Please remit until 2019-07-01."
    later = xml.replace(b">20190701<", b">20190715<")
    assert later != xml
    assert _mismatched(later, page) == ["due_date"]
    # A date under no due label proves no due date: nothing to compare.
    unlabelled = page.replace("Please remit until 2019-07-01.", "Thank you. 2019-07-01")
    assert _mismatched(later, unlabelled) == []


def test_a_cash_discounts_deadline_is_no_due_date_on_the_page() -> None:
    """XRECHNUNG_Einfach states its due date only in its terms: "Zahlbar innerhalb 30
    Tagen netto bis 04.04.2018, 3% Skonto innerhalb 10 Tagen bis 15.03.2018"."""
    xml, page = _xml_and_page(XRECHNUNG)
    assert read_cii(xml).payable_date == date(2018, 4, 4)
    assert _mismatched(xml, page) == []
    moved = page.replace("netto bis 04.04.2018", "netto bis 05.04.2018")
    assert _mismatched(xml, moved) == ["due_date"]
