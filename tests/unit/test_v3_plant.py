"""The contract-v3 plant benchmark (benchmarks/corpus/v3_plant.py) on vendored samples:
each plant changes a value a reader reads, lands where the XML states one and nowhere
else, and the planted invoice reviews (issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpus.embedded import decide
from benchmarks.corpus.v3_plant import PLANTS, planted
from pipeline.extraction import read_einvoice
from pipeline.validation import Decision
from tests.support.einvoices import without_cvd

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
ROUNDED = DATA / "payable" / "01.17a-INVOICE_uncefact.xml"
CREDIT = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
GBP = DATA / "currencies" / "02.01a-cvd_INVOICE_ubl.xml"
GBP_CII = DATA / "currencies" / "02.01a-cvd_INVOICE_uncefact.xml"
PRICE_DISCOUNT = DATA / "ubl" / "01.21a-INVOICE_ubl.xml"
NOT_SUBJECT_TO_VAT = DATA / "category_o" / "01.05_minimal_test_ubl.xml"
NOT_SUBJECT_TO_VAT_CII = DATA / "category_o" / "01.05_minimal_test_uncefact.xml"


@pytest.mark.parametrize(
    ("path", "plant"),
    [
        (ROUNDED, "amount_due"),
        (ROUNDED, "rounding"),
        (CREDIT, "line_entry"),
        (CREDIT, "basis"),
        (GBP, "tax_currency"),
        (GBP, "tax_number"),
        (GBP_CII, "tax_number"),
        (NOT_SUBJECT_TO_VAT, "o_seller_iban"),
        (NOT_SUBJECT_TO_VAT_CII, "o_seller_iban"),
        (NOT_SUBJECT_TO_VAT, "o_tax"),
        (NOT_SUBJECT_TO_VAT_CII, "o_tax"),
    ],
)
def test_a_planted_v3_value_is_read_and_reviewed(path: Path, plant: str) -> None:
    xml = path.read_bytes()
    if path.parent.name == "currencies":  # as published it fails EN 16931's BR-CL-13
        xml = without_cvd(xml)
    assert decide(xml, "").report.decision is Decision.SUCCEEDED
    wrong = planted(xml, plant)
    assert wrong is not None
    assert read_einvoice(wrong).extraction != read_einvoice(xml).extraction
    # master data is the untouched XML's: a planted seller tax number meets the true one
    assert decide(wrong, "", master_xml=xml).report.decision is Decision.REVIEW_REQUIRED


def test_a_plant_lands_only_where_the_xml_states_its_value() -> None:
    xml = PRICE_DISCOUNT.read_bytes()
    # 01.21a's only line allowance is a discount inside the price: no line entry to plant
    assert planted(xml, "line_entry") is None
    assert planted(xml, "tax_currency") is None
    # 01.17a's seller states a VAT id and no tax number (BT-32)
    assert planted(ROUNDED.read_bytes(), "tax_number") is None
    # a Swedish seller states its F-tax approval where BT-32 goes: no tax number to change
    forskott = (DATA / "ubl" / "BIS_Billing_30-Forskott_slutreglering.xml").read_bytes()
    assert b"F-skatt" in forskott
    assert planted(forskott, "tax_number") is None
    # the seller IBAN and the O tax are planted on invoices not subject to VAT only
    assert planted(ROUNDED.read_bytes(), "o_seller_iban") is None
    assert planted(GBP.read_bytes(), "o_tax") is None
    assert set(PLANTS) >= {"line_entry", "tax_currency", "tax_number"}


def test_the_national_account_on_file_is_accepted_and_another_planted_is_not() -> None:
    """The benchmark's tenant has the XML's bankgiro on file (as ``--account`` stores it):
    the invoice paid to it succeeds; the account changed (in every place the XML states
    it) is another than the one on file, and reviews."""
    xml = (DATA / "ubl" / "ubl-tc434-example9.xml").read_bytes()
    xml = xml.replace(b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>5050-1055</cbc:ID>")
    xml = xml.replace(b"<cbc:ID>RABONL2U</cbc:ID>", b"<cbc:ID>SE:BANKGIRO</cbc:ID>")
    assert decide(xml, "").report.decision is Decision.SUCCEEDED
    wrong = planted(xml, "national_account")
    assert wrong is not None and b"5050-1056" in wrong and b"5050-1055" not in wrong
    got = decide(wrong, "", master_xml=xml).report
    assert got.decision is Decision.REVIEW_REQUIRED
    assert [r.code.value for r in got.reasons] == ["payee_account_not_registered"]
    # only where the result holds a national account: not beside an IBAN, nor a BIC's
    assert planted(ROUNDED.read_bytes(), "national_account") is None
    assert planted(CREDIT.read_bytes(), "national_account") is None
