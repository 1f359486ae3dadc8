"""A second currency on the XML path (issue 44): an invoice priced in one currency whose
VAT is accounted in another (EN 16931 BT-6 tax currency, BT-111 the tax total in it) is
held as contract v3's ``tax_currency`` and ``tax_total_in_tax_currency``; any other
amount in a second currency, or a third currency, still reviews.

The vendored files (tests/data/einvoices/currencies, see its NOTICE) are KoSIT's
``02.01a-cvd`` in UBL and CII: priced in EUR, tax total 2048437.50 EUR and 2048437.50 GBP.
Their item classification ``CVD`` (the Clean Vehicles Directive) is XRechnung's code, not
one of EN 16931's UNTDID 7143 list, so as published they fail EN 16931's BR-CL-13 and
review (``einvoice_invalid``, field ``rules``); the test that wants one accepted removes it
(``without_cvd``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.invoice import (
    Extraction,
    TenantMasterData,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.evidence import EvidencedCurrency
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.validation import Decision
from pipeline.validation.currency import check_currency
from pipeline.validation.policy import check_presence
from tests.support.einvoices import decide_xml, without_cvd

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "currencies"
UBL = DATA / "02.01a-cvd_INVOICE_ubl.xml"
CII = DATA / "02.01a-cvd_INVOICE_uncefact.xml"


def _decide_eur(xml: bytes) -> tuple[Decision, list[tuple[str, str]], Extraction]:
    return decide_xml(xml, currencies=frozenset({"EUR"}))


@pytest.mark.parametrize(
    ("path", "bt111_path"),
    [
        (UBL, "/ubl:Invoice/cac:TaxTotal[2]/cbc:TaxAmount"),
        (
            CII,
            "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/"
            "ram:ApplicableHeaderTradeSettlement/"
            "ram:SpecifiedTradeSettlementHeaderMonetarySummation/ram:TaxTotalAmount[2]",
        ),
    ],
    ids=["ubl", "cii"],
)
def test_a_tax_currency_is_held_and_the_invoice_succeeds(path: Path, bt111_path: str) -> None:
    published = path.read_bytes()
    assert _decide_eur(published)[:2] == (Decision.REVIEW_REQUIRED, [("einvoice_invalid", "rules")])
    decision, reasons, e = _decide_eur(without_cvd(published))
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.currency is not None and e.currency.value == "EUR"
    assert e.tax_total is not None and e.tax_total.value == Decimal("2048437.50")
    assert e.gross_total is not None and e.gross_total.value == Decimal("12829687.50")
    assert e.tax_currency is not None and e.tax_currency.value == "GBP"
    assert e.tax_total_in_tax_currency is not None
    assert e.tax_total_in_tax_currency.value == Decimal("2048437.50")
    assert e.tax_total_in_tax_currency.evidence.quote == bt111_path
    dumped = json.loads(e.model_dump_json())
    assert (dumped["tax_currency"]["value"], dumped["tax_total_in_tax_currency"]["value"]) == (
        "GBP",
        "2048437.50",
    )
    assert uses_v3(e)


def test_cii_quantities_with_trailing_zeros_past_six_places_are_read() -> None:
    e = read_einvoice(CII.read_bytes()).extraction
    first = e.line_items[0]
    # BilledQuantity 30.00000000000, ChargeAmount 158125.0000000: the same numbers
    assert (first.quantity, first.unit_price) == (Decimal("30"), Decimal("158125"))
    assert len(e.line_items) == 2


def test_a_price_with_more_than_six_real_decimals_still_does_not_fit() -> None:
    xml = CII.read_bytes()
    planted = xml.replace(b"158125.0000000", b"158125.0000001", 1)
    assert planted != xml
    reading = read_einvoice(planted)
    assert any(r.field == "line_items[0]" for r in reading.reasons)


def test_another_amount_in_the_tax_currency_is_still_a_mixed_currency() -> None:
    xml = UBL.read_bytes()
    planted = xml.replace(
        b'<cbc:PayableAmount currencyID="EUR">', b'<cbc:PayableAmount currencyID="GBP">'
    )
    assert planted != xml
    decision, reasons, _ = _decide_eur(planted)
    assert decision is Decision.REVIEW_REQUIRED
    assert ("currency_mixed", "currency") in reasons


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a third currency among the tax totals
        (b'<cbc:TaxAmount currencyID="GBP">', b'<cbc:TaxAmount currencyID="USD">'),
        # the tax currency named, no tax total stated in it
        (b"<cbc:TaxCurrencyCode>GBP</cbc:TaxCurrencyCode>", b"<cbc:TaxCurrencyCode>CHF"
         b"</cbc:TaxCurrencyCode>"),
    ],
    ids=["third-currency", "no-total-in-it"],
)  # fmt: skip
def test_a_second_currency_contract_v3_cannot_hold_stays_an_obstacle(
    old: bytes, new: bytes
) -> None:
    xml = UBL.read_bytes()
    planted = xml.replace(old, new)
    assert planted != xml
    assert "two_currencies" in [o.code for o in obstacles(read_invoice_xml(planted), v3=True)]
    decision, _, _ = _decide_eur(planted)
    assert decision is Decision.REVIEW_REQUIRED


def test_contract_v2_still_counts_a_second_currency_as_an_obstacle() -> None:
    facts = read_invoice_xml(UBL.read_bytes())
    assert "two_currencies" in [o.code for o in obstacles(facts)]
    assert obstacles(facts, v3=True) == []


def test_validation_checks_the_tax_currency_and_its_total_together() -> None:
    e = read_einvoice(UBL.read_bytes()).extraction
    master = TenantMasterData((), frozenset({"EUR"}))
    assert check_currency(e, "", master) == []
    assert e.tax_currency is not None
    same = e.model_copy(
        update={"tax_currency": EvidencedCurrency(value="EUR", evidence=e.tax_currency.evidence)}
    )
    assert [(r.code.value, r.field) for r in check_currency(same, "", master)] == [
        ("currency_not_iso4217", "tax_currency")
    ]
    alone = e.model_copy(update={"tax_total_in_tax_currency": None})
    assert [(r.code.value, r.field) for r in check_presence(alone)] == [
        ("missing_field", "tax_total_in_tax_currency")
    ]


def test_the_model_grammar_offers_no_tax_currency_and_a_model_may_not_write_one() -> None:
    properties = extraction_json_schema()["properties"]
    assert "tax_currency" not in properties and "tax_total_in_tax_currency" not in properties
    e = read_einvoice(UBL.read_bytes()).extraction
    with pytest.raises(Exception, match="no model's to write"):
        parse_extraction(e.model_dump_json())
