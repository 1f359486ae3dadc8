"""The amount due after the gross total (EN 16931 BT-113 prepaid, BT-114 rounding, BT-115
due) on the XML path, contract v3: held where gross - prepaid + rounding = due, and a
planted wrong value still reviewed (issue 44).

The vendored files (tests/data/einvoices/payable, see its NOTICE) are KoSIT's 01.17a in
UBL and CII: gross 336.9, rounding 0.01, due 336.91. The prepaid cases are Peppol's
``Forskott_slutreglering`` (tests/data/einvoices/ubl) and the CII 01.17a with a
prepayment written in.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.invoice import (
    ReasonCode,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.evidence import EvidencedAmount
from pipeline.jobs.explain_result import evidenced_fields
from pipeline.validation import Decision
from pipeline.validation.arithmetic import check_arithmetic
from tests.support.einvoices import decide_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
UBL = DATA / "payable" / "01.17a-INVOICE_ubl.xml"
CII = DATA / "payable" / "01.17a-INVOICE_uncefact.xml"
PREPAID_UBL = DATA / "ubl" / "BIS_Billing_30-Forskott_slutreglering.xml"


@pytest.mark.parametrize(
    ("path", "due_path"),
    [
        (UBL, "/ubl:Invoice/cac:LegalMonetaryTotal/cbc:PayableAmount"),
        (
            CII,
            "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/"
            "ram:ApplicableHeaderTradeSettlement/"
            "ram:SpecifiedTradeSettlementHeaderMonetarySummation/ram:DuePayableAmount",
        ),
    ],
    ids=["ubl", "cii"],
)
def test_a_rounding_amount_is_held_and_the_invoice_succeeds(path: Path, due_path: str) -> None:
    decision, reasons, e = decide_xml(path.read_bytes())
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.gross_total is not None and e.gross_total.value == Decimal("336.9")
    assert e.rounding_amount is not None and e.rounding_amount.value == Decimal("0.01")
    assert e.amount_due is not None and e.amount_due.value == Decimal("336.91")
    assert e.prepaid_amount is None
    assert e.amount_due.evidence.quote == due_path
    assert e.amount_due.evidence.match == "xml"
    # The stored result (what the ERP is posted) carries it, and names contract v3.
    dumped = json.loads(e.model_dump_json())
    assert dumped["amount_due"]["value"] == "336.91"
    assert dumped["rounding_amount"]["value"] == "0.01"
    assert "prepaid_amount" not in dumped
    assert uses_v3(e)
    assert ("amount_due", "336.91") in [(f, v) for f, v, _ in evidenced_fields(dumped)]


@pytest.mark.parametrize("path", [UBL, CII], ids=["ubl", "cii"])
def test_a_planted_amount_due_is_reviewed(path: Path) -> None:
    xml = path.read_bytes()
    planted = xml.replace(b">336.91<", b">336.92<")
    assert planted != xml
    decision, reasons, _ = decide_xml(planted)
    assert decision is Decision.REVIEW_REQUIRED
    assert ("einvoice_not_holdable", "gross_total") in reasons
    assert ("gross_total_mismatch", "amount_due") in reasons


def test_a_planted_rounding_amount_is_reviewed() -> None:
    xml = UBL.read_bytes()
    planted = xml.replace(
        b">0.01</cbc:PayableRoundingAmount>", b">0.02</cbc:PayableRoundingAmount>"
    )
    assert planted != xml
    decision, reasons, _ = decide_xml(planted)
    assert decision is Decision.REVIEW_REQUIRED
    assert ("gross_total_mismatch", "amount_due") in reasons


def test_a_prepaid_amount_is_held_and_a_planted_one_reviewed() -> None:
    xml = PREPAID_UBL.read_bytes()
    decision, reasons, e = decide_xml(xml)
    assert reasons == []  # it states no account to pay: the ERP pays the one on file
    assert e.prepaid_amount is not None and e.prepaid_amount.value == Decimal("400000")
    assert e.amount_due is not None and e.amount_due.value == Decimal("75000")
    planted = xml.replace(b">400000</cbc:PrepaidAmount>", b">300000</cbc:PrepaidAmount>")
    assert planted != xml
    decision, reasons, _ = decide_xml(planted)
    assert decision is Decision.REVIEW_REQUIRED
    assert ("gross_total_mismatch", "amount_due") in reasons


_CII_DUE = b"<ram:DuePayableAmount>336.91</ram:DuePayableAmount>"


def _cii_prepaid(prepaid: bytes, due: bytes) -> bytes:
    xml = CII.read_bytes()
    out = xml.replace(
        _CII_DUE,
        b"<ram:TotalPrepaidAmount>" + prepaid + b"</ram:TotalPrepaidAmount>"
        b"<ram:DuePayableAmount>" + due + b"</ram:DuePayableAmount>",
    )
    assert out != xml
    return out


def test_a_cii_prepayment_is_held_and_its_sum_checked() -> None:
    decision, reasons, e = decide_xml(_cii_prepaid(b"100.00", b"236.91"))
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.prepaid_amount is not None and e.prepaid_amount.value == Decimal("100.00")
    assert e.prepaid_amount.evidence.quote.endswith("ram:TotalPrepaidAmount")
    assert e.amount_due is not None and e.amount_due.value == Decimal("236.91")
    decision, reasons, _ = decide_xml(_cii_prepaid(b"100.00", b"246.91"))
    assert decision is Decision.REVIEW_REQUIRED
    assert ("gross_total_mismatch", "amount_due") in reasons


def test_a_negative_prepayment_or_amount_due_stays_an_obstacle() -> None:
    # 336.9 - (-100) + 0.01 = 436.91 sums, but would pay more than the invoice.
    more = read_invoice_xml(_cii_prepaid(b"-100.00", b"436.91"))
    assert [o.code for o in obstacles(more, v3=True)] == ["amount_due"]
    # 336.9 - 436.9 + 0.01 = -99.99: a credit without a credit note's type.
    credit = read_invoice_xml(_cii_prepaid(b"436.90", b"-99.99"))
    assert [o.code for o in obstacles(credit, v3=True)] == ["amount_due"]
    decision, _, _ = decide_xml(_cii_prepaid(b"-100.00", b"436.91"))
    assert decision is Decision.REVIEW_REQUIRED


def test_contract_v2_still_counts_the_amount_due_as_an_obstacle() -> None:
    facts = read_invoice_xml(UBL.read_bytes())
    assert [o.code for o in obstacles(facts)] == ["amount_due"]
    assert obstacles(facts, v3=True) == []


def test_an_invoice_whose_amount_due_is_its_gross_total_dumps_no_payable_field() -> None:
    xml = UBL.read_bytes()
    plain = xml.replace(
        b'<cbc:PayableRoundingAmount currencyID="EUR">0.01</cbc:PayableRoundingAmount>', b""
    ).replace(b">336.91<", b">336.9<")
    reading = read_einvoice(plain)
    assert reading.reasons == ()
    dumped = json.loads(reading.extraction.model_dump_json())
    assert not {"prepaid_amount", "rounding_amount", "amount_due"} & set(dumped)
    assert not uses_v3(reading.extraction)


def test_the_arithmetic_checks_a_result_that_states_a_prepayment_without_its_due() -> None:
    e = read_einvoice(_cii_prepaid(b"100.00", b"236.91")).extraction
    assert check_arithmetic(e) == []
    without_due = e.model_copy(update={"amount_due": None})
    assert [(r.code, r.field) for r in check_arithmetic(without_due)] == [
        (ReasonCode.GROSS_TOTAL_MISMATCH, "amount_due")
    ]
    assert e.amount_due is not None
    wrong = e.model_copy(
        update={
            "amount_due": EvidencedAmount(value=Decimal("300.00"), evidence=e.amount_due.evidence)
        }
    )
    assert [r.rule for r in check_arithmetic(wrong)] == ["validation.amount_due_mismatch"]


def test_a_model_may_not_write_the_amount_due() -> None:
    e = read_einvoice(UBL.read_bytes()).extraction
    with pytest.raises(Exception, match="no model's to write"):
        parse_extraction(e.model_dump_json())


_CII_ROUNDING = b"<ram:RoundingAmount>0.01</ram:RoundingAmount>"


def _cii_due_is_gross(extra: bytes) -> bytes:
    """01.17a CII without its rounding (due 336.9 = gross), ``extra`` before the due."""
    xml = CII.read_bytes()
    out = xml.replace(_CII_ROUNDING, b"").replace(
        _CII_DUE, extra + b"<ram:DuePayableAmount>336.9</ram:DuePayableAmount>"
    )
    assert out.count(b"336.9<") == 2  # gross and due
    return out


def test_the_same_invoice_with_its_amount_due_equal_to_the_gross_total_succeeds() -> None:
    decision, reasons, e = decide_xml(_cii_due_is_gross(b""))
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert (e.amount_due, e.prepaid_amount, e.rounding_amount) == (None, None, None)


@pytest.mark.parametrize(
    "extra",
    [
        b"<ram:TotalPrepaidAmount>1.00</ram:TotalPrepaidAmount>",
        b"<ram:RoundingAmount>0.01</ram:RoundingAmount>",
    ],
    ids=["prepaid-not-subtracted", "rounding-not-added"],
)
def test_a_prepaid_or_rounding_amount_the_amount_due_leaves_out_reviews(extra: bytes) -> None:
    # EN 16931 BR-CO-16: due = gross - prepaid + rounding; here due = gross all the same
    planted = _cii_due_is_gross(extra)
    facts = read_invoice_xml(planted)
    assert [o.code for o in obstacles(facts)] == ["amount_due"]
    assert [o.code for o in obstacles(facts, v3=True)] == ["amount_due"]
    decision, _, _ = decide_xml(planted)
    assert decision is Decision.REVIEW_REQUIRED
