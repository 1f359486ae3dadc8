"""The planted-disagreement benchmark's plants (benchmarks/corpus/xml_plant.py), on a
vendored corpus sample (tests/data/einvoices, see its NOTICE): each plant changes what
it says, and the e-invoice path reviews the result with ``xml_text_mismatch``."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpus.embedded import EmbeddedInvoice, decide
from benchmarks.corpus.xml_plant import PLANTS, _other_iban
from pipeline.documents import pdf_attachments, read_pdf_text
from pipeline.extraction import read_cii
from pipeline.invoice import ReasonCode, iban_checksum_ok
from pipeline.validation import Decision
from tests.support.einvoices import mustang_valid_today

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"


def _mustang() -> EmbeddedInvoice:
    data = (DATA / "MustangGnuaccountingBeispielRE-20190610_507.pdf").read_bytes()
    ((_, xml),) = pdf_attachments(data).items()
    page = "\f".join(p.laid_out().text for p in read_pdf_text(data, max_pages=5).pages)
    return EmbeddedInvoice("mustang.pdf", mustang_valid_today(xml), page)


def test_another_iban_is_valid_and_of_the_same_country() -> None:
    for iban in ("DE88200800000970375700", "FR7630006000011234567890189"):
        other = _other_iban(iban)
        assert other != iban and other[:2] == iban[:2] and len(other) == len(iban)
        assert iban_checksum_ok(other)


@pytest.mark.parametrize(
    ("plant", "field"),
    [
        ("page_gross_total", "gross_total"),
        ("xml_iban", "iban"),
        ("page_invoice_number", "invoice_number"),
        ("page_issue_date", "issue_date"),
    ],
)
def test_each_plant_is_caught_by_the_page_cross_check(plant: str, field: str) -> None:
    doc = _mustang()
    assert decide(doc.xml, doc.page).report.decision is Decision.SUCCEEDED
    planted = PLANTS[plant](doc, read_cii(doc.xml))
    assert planted is not None and (planted.xml, planted.page) != (doc.xml, doc.page)
    report = decide(planted.xml, planted.page).report
    assert report.decision is Decision.REVIEW_REQUIRED
    mismatch = [r for r in report.reasons if r.code is ReasonCode.XML_TEXT_MISMATCH]
    assert [r.field for r in mismatch] == [field]
