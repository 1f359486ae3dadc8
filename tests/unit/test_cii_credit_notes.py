"""A standalone CII credit note (issue 44): a ``CrossIndustryInvoice`` of document type 381
uploaded as XML, not inside a PDF, is read and decided by the rules the UBL CreditNote
and the Factur-X PDF follow: a credit note (contract v3's ``document_type``) whose
amounts are stated positive, negative totals a debit to review, no IBAN required, and
the invoice it credits (BT-25, ``InvoiceReferencedDocument``) read with its XML path.

The file is the corpus' one standalone CII 381, Mustang's ``testout-ZF2PushCreditNote``
(tests/data/einvoices/cii_credit_note, see its NOTICE); a preceding invoice reference is
written into a copy where EN 16931's CII binding puts it, after the header summation.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.extraction.einvoice import CII_READER
from pipeline.invoice import CONTRACT_V3, SupplierRecord, TenantMasterData
from pipeline.validation import Decision
from pipeline.worker.interpretation import Interpretation, interpret_einvoice

CREDIT = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "cii_credit_note"
XML = CREDIT / "testout-ZF2PushCreditNote.xml"
SELLER = SupplierRecord("Test company", "DE0815", frozenset({"DE88200800000970375700"}), "4711")
TODAY = date(2020, 12, 23)
_SUMMATION_END = b"      </ram:SpecifiedTradeSettlementHeaderMonetarySummation> \n"
_SETTLEMENT = (
    "/rsm:CrossIndustryInvoice/rsm:SupplyChainTradeTransaction/ram:ApplicableHeaderTradeSettlement"
)


def _reference(number: str, day: str) -> bytes:
    return (
        f"      <ram:InvoiceReferencedDocument><ram:IssuerAssignedID>{number}"
        "</ram:IssuerAssignedID><ram:FormattedIssueDateTime><qdt:DateTimeString xmlns:qdt="
        '"urn:un:unece:uncefact:data:standard:QualifiedDataType:100" format="102">'
        f"{day}</qdt:DateTimeString></ram:FormattedIssueDateTime>"
        "</ram:InvoiceReferencedDocument>\n"
    ).encode()


def _with(*references: bytes) -> bytes:
    xml = XML.read_bytes()
    assert xml.count(_SUMMATION_END) == 1
    return xml.replace(_SUMMATION_END, _SUMMATION_END + b"".join(references))


def _decide(xml: bytes) -> Interpretation:
    master = TenantMasterData((SELLER,), frozenset({"EUR"}))
    return interpret_einvoice(xml, master, schema_version=3, today=TODAY)


def _replace(xml: bytes, old: bytes, new: bytes) -> bytes:
    assert xml.count(old) == 1, old
    return xml.replace(old, new)


def test_a_standalone_cii_381_is_a_credit_note_accepted_as_stated() -> None:
    xml = XML.read_bytes()
    facts = read_invoice_xml(xml)
    assert (facts.syntax, facts.type_code, facts.document_type) == (
        "CII-D16B",
        "381",
        "credit_note",
    )
    # contract v2 (a model's answer) holds no credit note; contract v3 holds a 381
    assert [o.code for o in obstacles(facts)] == ["credit_note"]
    assert obstacles(facts, v3=True) == []
    got = _decide(xml)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    assert (got.contract, got.reader) == (CONTRACT_V3, CII_READER)
    e = got.extraction
    assert e.document_type == "credit_note" and e.preceding_invoice is None
    # EN 16931: the credit's amounts are stated positive, as the invoice's were
    assert (e.net_total, e.tax_total, e.gross_total) != (None, None, None)
    assert e.net_total is not None and e.tax_total is not None and e.gross_total is not None
    assert (e.net_total.value, e.tax_total.value, e.gross_total.value) == (
        Decimal("3.00"),
        Decimal("0.57"),
        Decimal("3.57"),
    )
    assert got.result()["document_type"] == "credit_note"


def test_the_credited_invoice_is_read_from_invoice_referenced_document() -> None:
    got = _decide(_with(_reference("RE-2020-17", "20201201")))
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    ref = got.extraction.preceding_invoice
    assert ref is not None
    assert (ref.number, ref.issue_date) == ("RE-2020-17", date(2020, 12, 1))
    assert (ref.evidence.match, ref.evidence.quote) == (
        "xml",
        f"{_SETTLEMENT}/ram:InvoiceReferencedDocument/ram:IssuerAssignedID",
    )
    assert got.result()["preceding_invoice"] == {
        "number": "RE-2020-17",
        "issue_date": "2020-12-01",
        "evidence": {
            "page": 1,
            "start": 0,
            "end": 0,
            "quote": f"{_SETTLEMENT}/ram:InvoiceReferencedDocument/ram:IssuerAssignedID",
            "match": "xml",
        },
    }


def test_a_credit_note_of_two_invoices_or_a_reference_without_number_is_reviewed() -> None:
    two = read_einvoice(_with(_reference("RE-1", "20201201"), _reference("RE-2", "20201202")))
    assert [r.detail.split(":")[0] for r in two.reasons] == ["preceding_invoices"]
    no_number = _with(
        b"      <ram:InvoiceReferencedDocument><ram:FormattedIssueDateTime><qdt:DateTimeString"
        b' xmlns:qdt="urn:un:unece:uncefact:data:standard:QualifiedDataType:100"'
        b' format="102">20201201</qdt:DateTimeString></ram:FormattedIssueDateTime>'
        b"</ram:InvoiceReferencedDocument>\n"
    )
    details = [r.detail for r in read_einvoice(no_number).reasons]
    assert "preceding_invoices: a reference without its number" in details


@pytest.mark.parametrize(
    ("type_code", "expected"),
    [
        (b"381", "negative totals on document type 381 (a debit)"),
        (b"380", "negative totals on document type 380 (a correction or credit)"),
    ],
)
def test_negative_totals_are_a_debit_on_a_credit_note(type_code: bytes, expected: str) -> None:
    xml = _replace(XML.read_bytes(), b"<ram:TypeCode>381<", b"<ram:TypeCode>" + type_code + b"<")
    planted = _replace(xml, b">3.57</ram:GrandTotalAmount>", b">-3.57</ram:GrandTotalAmount>")
    assert f"negative_amounts: {expected}" in [r.detail for r in read_einvoice(planted).reasons]


def test_a_credit_note_needs_no_iban_nor_does_an_invoice_stating_no_account() -> None:
    xml = XML.read_bytes()
    iban = b"<ram:IBANID>DE88200800000970375700</ram:IBANID>"
    without = _replace(xml, iban, b"")
    got = _decide(without)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    as_invoice = _replace(without, b"<ram:TypeCode>381<", b"<ram:TypeCode>380<")
    # the invoice states no account to pay either: the ERP pays the one on file
    assert _decide(as_invoice).report.reasons == ()


def test_a_line_the_credit_takes_back_counts_with_its_sign() -> None:
    """A line with a negative quantity and amount (one the credit note takes back) is
    arithmetic as on an invoice: 1 + 1 - 1 = 1.00 net, 0.19 tax, 1.19 gross."""
    xml = XML.read_bytes()
    third = xml.rindex(b'<ram:BilledQuantity unitCode="C62">1.0000</ram:BilledQuantity>')
    amount = xml.index(b"<ram:LineTotalAmount>1.00</ram:LineTotalAmount>", third)
    taken = (
        xml[:third]
        + b'<ram:BilledQuantity unitCode="C62">-1.0000</ram:BilledQuantity>'
        + xml[
            third + len(b'<ram:BilledQuantity unitCode="C62">1.0000</ram:BilledQuantity>') : amount
        ]
        + b"<ram:LineTotalAmount>-1.00</ram:LineTotalAmount>"
        + xml[amount + len(b"<ram:LineTotalAmount>1.00</ram:LineTotalAmount>") :]
    )
    for old, new in (
        (b"<ram:CalculatedAmount>0.57<", b"<ram:CalculatedAmount>0.19<"),
        (b"<ram:BasisAmount>3.00<", b"<ram:BasisAmount>1.00<"),
        (b"<ram:LineTotalAmount>3.00<", b"<ram:LineTotalAmount>1.00<"),
        (b"<ram:TaxBasisTotalAmount>3.00<", b"<ram:TaxBasisTotalAmount>1.00<"),
        (b">0.57</ram:TaxTotalAmount>", b">0.19</ram:TaxTotalAmount>"),
        (b">3.57</ram:GrandTotalAmount>", b">1.19</ram:GrandTotalAmount>"),
        (b">3.57</ram:DuePayableAmount>", b">1.19</ram:DuePayableAmount>"),
    ):
        taken = _replace(taken, old, new)
    got = _decide(taken)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    lines = got.extraction.line_items
    assert [(i.quantity, i.line_amount) for i in lines][-1] == (Decimal(-1), Decimal("-1.00"))
    # the line's amount planted positive again: the credit's own arithmetic catches it
    wrong = _replace(
        taken,
        b"<ram:LineTotalAmount>-1.00</ram:LineTotalAmount>",
        b"<ram:LineTotalAmount>1.00</ram:LineTotalAmount>",
    )
    codes = {r.code.value for r in _decide(wrong).report.reasons}
    assert {"line_amount_mismatch", "net_total_mismatch"} <= codes
