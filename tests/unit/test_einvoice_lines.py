"""Line-level allowances and charges (EN 16931 BG-27, BG-28) and price basis quantities
(BT-149) on the XML path, contract v3: a line's net amount is quantity x unit price /
basis, less its allowances, plus its charges; held and checked, and a planted wrong value
still reviewed (issue 44).

Peppol's credit note ``BIS_Billing_30-Kreditering_med_kreditnota`` (vendored under
tests/data/einvoices/credit_notes, see its NOTICE) states line 1 as 2000 x 10 per 2, less
a 300 quantity discount, plus a 500 repacking charge = 10200, and line 2 as -800 x 4 per 5
= -640 (with a price-level discount inside the price, which is no line allowance). The
CII cases are KoSIT's 01.17a (tests/data/einvoices/payable) with a line allowance and a
charge of 12.00 each written into its first line.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.invoice import (
    LineAllowanceCharge,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.validation import Decision
from pipeline.validation.arithmetic import check_arithmetic
from tests.support.einvoices import decide_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
CREDIT = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
CII = DATA / "payable" / "01.17a-INVOICE_uncefact.xml"


def test_a_credit_note_with_line_allowances_charges_and_price_bases_succeeds() -> None:
    decision, reasons, e = decide_xml(CREDIT.read_bytes())
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    first, second = e.line_items
    assert (first.quantity, first.unit_price, first.price_basis_quantity, first.line_amount) == (
        Decimal("2000"),
        Decimal("10"),
        Decimal("2"),
        Decimal("10200"),
    )
    assert [(a.kind, a.amount, a.reason) for a in first.allowances_charges] == [
        ("allowance", Decimal("300"), "Quantity discount"),
        ("charge", Decimal("500"), "Repacking"),
    ]
    assert first.allowances_charges[0].evidence.quote == (
        "/ubl:CreditNote/cac:CreditNoteLine[1]/cac:AllowanceCharge[1]"
    )
    # The discount inside line 2's price is the price's, not a line allowance.
    assert (second.price_basis_quantity, second.line_amount, second.allowances_charges) == (
        Decimal("5"),
        Decimal("-640"),
        (),
    )
    dumped = json.loads(e.model_dump_json())
    assert dumped["line_items"][0]["price_basis_quantity"] == "2"
    assert dumped["line_items"][0]["allowances_charges"][1]["amount"] == "500"
    assert "allowances_charges" not in dumped["line_items"][1]
    assert uses_v3(e)


def _sek(amount: str) -> bytes:
    return f'<cbc:Amount currencyID="SEK">{amount}</cbc:Amount>'.encode()


def _basis(quantity: str) -> bytes:
    return f'<cbc:BaseQuantity unitCode="EA">{quantity}</cbc:BaseQuantity>'.encode()


_REPACKING = "</cbc:ChargeIndicator>\n\t\t\t<cbc:AllowanceChargeReason>Repacking"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (_sek("300"), _sek("400")),
        (_sek("500"), _sek("600")),
        (_basis("2"), _basis("1")),
        (f"true{_REPACKING}".encode(), f"false{_REPACKING}".encode()),
    ],
    ids=["allowance", "charge", "basis", "indicator"],
)
def test_a_planted_line_value_is_reviewed(old: bytes, new: bytes) -> None:
    xml = CREDIT.read_bytes()
    planted = xml.replace(old, new, 1)
    assert planted != xml
    decision, reasons, _ = decide_xml(planted)
    assert decision is Decision.REVIEW_REQUIRED
    assert ("line_amount_mismatch", "line_items[0].line_amount") in reasons


def test_a_line_entry_without_its_amount_stays_an_obstacle() -> None:
    xml = CREDIT.read_bytes()
    planted = xml.replace(b'<cbc:Amount currencyID="SEK">300</cbc:Amount>', b"", 1)
    assert planted != xml
    assert "item_allowances_charges" in [
        o.code for o in obstacles(read_invoice_xml(planted), v3=True)
    ]


def test_contract_v2_still_counts_line_allowances_and_price_bases_as_obstacles() -> None:
    facts = read_invoice_xml(CREDIT.read_bytes())
    v2 = {o.code for o in obstacles(facts)}
    assert {"item_allowances_charges", "price_basis"} <= v2
    assert obstacles(facts, v3=True) == []


_CII_LINE_SUM = b"<ram:SpecifiedTradeSettlementLineMonetarySummation>"


def _cii_with_line_entries(allowance: bytes, charge: bytes) -> bytes:
    xml = CII.read_bytes()

    def entry(indicator: bytes, amount: bytes, reason: bytes) -> bytes:
        return (
            b"<ram:SpecifiedTradeAllowanceCharge><ram:ChargeIndicator><udt:Indicator>"
            + indicator
            + b"</udt:Indicator></ram:ChargeIndicator><ram:ActualAmount>"
            + amount
            + b"</ram:ActualAmount><ram:Reason>"
            + reason
            + b"</ram:Reason></ram:SpecifiedTradeAllowanceCharge>"
        )

    entries = entry(b"false", allowance, b"Damage") + entry(b"true", charge, b"Testing")
    out = xml.replace(_CII_LINE_SUM, entries + _CII_LINE_SUM, 1)
    assert out != xml
    return out


def test_cii_line_allowances_and_charges_are_held_and_checked() -> None:
    decision, reasons, e = decide_xml(_cii_with_line_entries(b"12.00", b"12.00"))
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert [(a.kind, a.amount) for a in e.line_items[0].allowances_charges] == [
        ("allowance", Decimal("12.00")),
        ("charge", Decimal("12.00")),
    ]
    decision, reasons, _ = decide_xml(_cii_with_line_entries(b"12.00", b"13.00"))
    assert decision is Decision.REVIEW_REQUIRED
    assert ("line_amount_mismatch", "line_items[0].line_amount") in reasons


def test_the_arithmetic_names_a_line_entry_and_the_basis() -> None:
    e = read_einvoice(CREDIT.read_bytes()).extraction
    assert check_arithmetic(e) == []
    first = e.line_items[0]
    extra = LineAllowanceCharge(
        kind="allowance", amount=Decimal("1"), evidence=first.allowances_charges[0].evidence
    )
    changed = first.model_copy(update={"allowances_charges": (*first.allowances_charges, extra)})
    wrong = e.model_copy(update={"line_items": (changed, *e.line_items[1:])})
    [reason] = check_arithmetic(wrong)[:1]
    assert reason.detail == (
        "2000 x 10 / 2 - allowance 300 + charge 500 - allowance 1 = 10199.00, stated 10200"
    )


def test_the_model_grammar_offers_no_line_entries_and_a_model_may_not_write_them() -> None:
    row = extraction_json_schema()["properties"]["line_items"]["items"]["properties"]
    assert "allowances_charges" not in row and "price_basis_quantity" not in row
    e = read_einvoice(CREDIT.read_bytes()).extraction
    plain = e.model_copy(update={"document_type": "invoice", "preceding_invoice": None})
    with pytest.raises(Exception, match="no model's to write"):
        parse_extraction(plain.model_dump_json())
