"""The page of a Factur-X/ZUGFeRD PDF cross-checked with its XML (issue 44): a page that
prints what the XML states agrees however it spells it; a page that says otherwise goes
to review with ``xml_text_mismatch`` naming the fields.

The pages are the vendored samples' own text (tests/data/einvoices, see its NOTICE),
changed where a test plants a disagreement.
"""

from __future__ import annotations

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
