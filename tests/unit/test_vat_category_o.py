"""An invoice not subject to VAT (issue 44, contract v3; EN 16931 VAT category ``O``,
BR-O-01 to BR-O-14): its lines and its one tax breakdown carry category ``O`` and no
rate, its tax is 0, and its seller states neither VAT id (BR-O-02 forbids one) nor,
here, a tax number. Master data then proves the seller by the one identifier it
states: its IBAN, on file for the supplier of that name; without it the invoice is
reviewed ``supplier_unidentified``.

The files are vendored corpus samples (tests/data/einvoices/category_o, see its NOTICE):
KoSIT's ``01.05`` minimal invoice in UBL and CII, and Peppol's minimum invoice without
VAT, which states no IBAN.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.errors import MalformedOutput
from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.invoice import (
    CONTRACT_V3,
    Evidence,
    LineItem,
    ReasonCode,
    SupplierRecord,
    TaxLine,
    TenantMasterData,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.validation import Decision, validate
from pipeline.worker.interpretation import Interpretation, interpret_einvoice

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "category_o"
UBL = DATA / "01.05_minimal_test_ubl.xml"
CII = DATA / "01.05_minimal_test_uncefact.xml"
NO_IBAN = DATA / "Invoice-Min_content_without_VAT.xml"
SELLER = "[Seller name]"
IBAN = "DE79000000001234567890"
TODAY = date(2018, 4, 14)
#: The store keeps no supplier without VAT id or tax number: the seller is on file by its
#: tax number, which the invoice does not state.
ON_FILE = SupplierRecord(SELLER, None, frozenset({IBAN}), tax_number="12/345/67890")
_EVIDENCE = Evidence(page=1, start=0, end=0, quote="/x", match="xml")


def _decide(
    xml: bytes, *suppliers: SupplierRecord, today: date = TODAY, schema_version: int = 3
) -> Interpretation:
    master = TenantMasterData(suppliers, frozenset({"EUR", "SEK"}))
    return interpret_einvoice(xml, master, schema_version=schema_version, today=today)


def _codes(outcome: Interpretation) -> set[tuple[str, str]]:
    return {(r.code.value, r.field) for r in outcome.report.reasons}


@pytest.mark.parametrize(
    ("path", "tax_total_path"),
    [
        (UBL, "/ubl:Invoice/cac:TaxTotal/cbc:TaxAmount"),
        # CII leaves BT-110 out: the total is the one breakdown's tax amount (BR-CO-14)
        (CII, "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/"
              "ram:ApplicableHeaderTradeSettlement/ram:ApplicableTradeTax"),
    ],
)  # fmt: skip
def test_the_readers_hold_category_o_without_a_rate(path: Path, tax_total_path: str) -> None:
    xml = path.read_bytes()
    facts = read_invoice_xml(xml)
    assert facts.not_subject_to_vat
    assert (facts.seller_vat_id, facts.seller_tax_number) == (None, None)
    # contract v2 (a model's answer) still cannot hold it; contract v3 (the XML path) can
    assert {o.code for o in obstacles(facts)} == {"no_vat_id", "item_incomplete"}
    assert obstacles(facts, v3=True) == []
    reading = read_einvoice(xml)
    assert reading.reasons == ()
    e = reading.extraction
    ((line,),) = (e.line_items,)
    assert (line.tax_rate, line.tax_category) == (None, "O")
    assert (line.quantity, line.unit_price, line.line_amount) == (
        Decimal(30),
        Decimal("158.125"),
        Decimal("4743.75"),
    )
    ((tax,),) = (e.tax_lines,)
    assert (tax.rate, tax.tax_category, tax.base, tax.amount) == (
        None,
        "O",
        Decimal("4743.75"),
        Decimal("0"),
    )
    assert e.tax_total is not None and e.tax_total.value == 0
    assert e.tax_total.evidence.quote == tax_total_path
    assert e.net_total is not None and e.gross_total is not None
    assert e.net_total.value == e.gross_total.value == Decimal("4743.75")
    assert (e.supplier.vat_id, e.supplier.tax_number) == (None, None)
    assert e.iban is not None and e.iban.value == IBAN
    assert e.not_subject_to_vat() and uses_v3(e)
    dumped = json.loads(e.model_dump_json())
    assert dumped["line_items"][0]["tax_rate"] is None
    assert dumped["line_items"][0]["tax_category"] == "O"
    assert (dumped["tax_lines"][0]["rate"], dumped["tax_lines"][0]["tax_category"]) == (None, "O")


@pytest.mark.parametrize("path", [UBL, CII])
def test_the_seller_is_proven_by_its_iban_on_file(path: Path) -> None:
    got = _decide(path.read_bytes(), ON_FILE)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    assert got.contract == CONTRACT_V3
    result = got.result()
    assert result["supplier"]["vat_id"] is None
    assert result["tax_lines"][0]["tax_category"] == "O"


@pytest.mark.parametrize("path", [UBL, CII])
def test_a_v1_job_cannot_hold_an_invoice_not_subject_to_vat(path: Path) -> None:
    """Rows without a rate and a seller without tax id are contract v3's only: a job
    that asked for schema_version 1 goes to review naming them."""
    got = _decide(path.read_bytes(), ON_FILE, schema_version=1)
    assert got.report.decision is Decision.REVIEW_REQUIRED
    fields = {r.field for r in got.report.reasons if r.code.value == "contract_v3_required"}
    assert "line_items[0].tax_category" in fields
    assert "tax_lines[0].tax_category" in fields


@pytest.mark.parametrize("path", [UBL, CII])
def test_a_name_alone_proves_no_seller(path: Path) -> None:
    """The name is on file, the IBAN is not (or another one is): nothing master data
    holds proves who issued it, and review says why."""
    no_iban = SupplierRecord(SELLER, None, frozenset(), tax_number="12/345/67890")
    got = _decide(path.read_bytes(), no_iban)
    assert _codes(got) == {("supplier_unidentified", "supplier.name")}
    (reason,) = got.report.reasons
    assert "neither VAT id nor tax number" in reason.detail
    assert "none (no IBAN) on file" in reason.detail
    another = SupplierRecord(SELLER, "DE123456789", frozenset({"DE02120300000000202051"}))
    assert _codes(_decide(path.read_bytes(), another)) == {
        ("supplier_unidentified", "supplier.name"),
        ("iban_not_registered", "iban"),
    }


def test_an_invoice_without_iban_goes_to_review_naming_why() -> None:
    xml = NO_IBAN.read_bytes()
    facts = read_invoice_xml(xml)
    assert facts.not_subject_to_vat and facts.ibans == ()
    seller = SupplierRecord("Säljbolaget AB", None, frozenset({IBAN}), tax_number="1234567890")
    got = _decide(xml, seller, today=date(2018, 8, 1))
    assert got.report.decision is Decision.REVIEW_REQUIRED
    # it states no account to pay, which alone the ERP would pay from its vendor master,
    # but then nothing proves its seller
    assert _codes(got) == {("supplier_unidentified", "supplier.name")}
    assert "and no IBAN" in next(
        r.detail for r in got.report.reasons if r.code is ReasonCode.SUPPLIER_UNIDENTIFIED
    )


def test_of_two_suppliers_of_one_name_the_iban_picks() -> None:
    other = SupplierRecord(SELLER, "DE123456789", frozenset({"DE02120300000000202051"}))
    got = _decide(UBL.read_bytes(), other, ON_FILE)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons


def test_only_category_o_exempts_the_seller_from_a_vat_id() -> None:
    """A standard-rated line beside category O: not an invoice not subject to VAT
    (BR-O-11 to BR-O-14), so the seller without VAT id or tax number is an obstacle
    again, and the line without rate is incomplete."""
    xml = UBL.read_bytes()
    line_category = b"<cac:ClassifiedTaxCategory>\n        <cbc:ID>O</cbc:ID>"
    assert line_category in xml
    mixed = xml.replace(line_category, b"<cac:ClassifiedTaxCategory>\n        <cbc:ID>S</cbc:ID>")
    facts = read_invoice_xml(mixed)
    assert not facts.not_subject_to_vat
    assert {o.code for o in obstacles(facts, v3=True)} == {
        "no_vat_id",
        "vat_category_o",
        "item_incomplete",
    }
    got = _decide(mixed, ON_FILE)
    assert got.report.decision is Decision.REVIEW_REQUIRED
    assert ("missing_field", "supplier.vat_id") in _codes(got)


def test_category_o_with_a_rate_is_reviewed() -> None:
    xml = UBL.read_bytes()
    rate = b"<cbc:Percent>0</cbc:Percent>"
    assert xml.count(rate) == 1
    planted = xml.replace(rate, b"<cbc:Percent>7</cbc:Percent>")
    reasons = read_einvoice(planted).reasons
    assert [r.detail for r in reasons if r.field != "rules"] == [
        "vat_category_o: not subject to VAT (category O) with rate 7"
    ]
    # EN 16931 finds it too: 7 % of the taxable amount is not the stated 0.00 (BR-CO-17).
    assert [r.detail.split(" (")[0] for r in reasons if r.field == "rules"] == [
        "fails EN 16931 rules BR-CO-17"
    ]


def test_tax_on_category_o_is_a_mismatch() -> None:
    """BR-O-09: the breakdown's tax is 0; a stated tax is caught by the arithmetic."""
    e = read_einvoice(UBL.read_bytes()).extraction
    (tax,) = e.tax_lines
    taxed = e.model_copy(
        update={"tax_lines": (tax.model_copy(update={"amount": Decimal("1.00")}),)}
    )
    master = TenantMasterData((ON_FILE,), frozenset({"EUR"}))
    report = validate(taxed, "", master, today=TODAY)
    assert ("tax_line_mismatch", "tax_lines[0].amount") in {
        (r.code.value, r.field) for r in report.reasons
    }
    (detail,) = [r.detail for r in report.reasons if r.field == "tax_lines[0].amount"]
    assert detail == "4743.75 not subject to VAT (category O) = 0.00, stated 1.00"


def test_only_category_o_leaves_its_rate_out() -> None:
    with pytest.raises(ValidationError, match="only category O"):
        LineItem(
            description="x",
            quantity=Decimal(1),
            unit_price=Decimal(1),
            line_amount=Decimal(1),
            tax_rate=None,
            evidence=_EVIDENCE,
        )
    with pytest.raises(ValidationError, match="states no rate"):
        TaxLine(
            rate=Decimal(0),
            base=Decimal(1),
            amount=Decimal(0),
            evidence=_EVIDENCE,
            tax_category="O",
        )


def test_the_model_may_not_leave_a_rate_out() -> None:
    """A model's grammar offers the rate as before (no null, no category), and an answer
    without one is refused."""
    schema = extraction_json_schema()
    line = schema["properties"]["line_items"]["items"]["properties"]
    tax = schema["properties"]["tax_lines"]["items"]["properties"]
    assert line["tax_rate"]["type"] == "string" and "anyOf" not in line["tax_rate"]
    assert tax["rate"]["type"] == "string" and "anyOf" not in tax["rate"]
    assert "tax_category" not in line and "tax_category" not in tax
    e = read_einvoice(UBL.read_bytes()).extraction
    answer = json.loads(e.model_dump_json())
    with pytest.raises(MalformedOutput):
        parse_extraction(json.dumps(answer))
    for row in (answer["line_items"][0], answer["tax_lines"][0]):
        row.pop("tax_category")
    with pytest.raises(MalformedOutput, match="only category O"):
        parse_extraction(json.dumps(answer))
