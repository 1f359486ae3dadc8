"""A seller known by its tax number (issue 44, contract v3): EN 16931 BT-32 read from the
XML into ``supplier.tax_number``, matched against master data where the result has no VAT
id, and a wrong or unknown one reviewed as the VAT id path reviews.

The e-invoice is the vendored XRechnung sample (tests/data/einvoices, see its NOTICE)
uploaded as XML, once as published (VAT id and tax number) and once with its VAT id
registration removed: EN 16931 BR-S-02 lets a standard-rated invoice name its seller by
the tax registration (BT-32) instead of the VAT id (BT-31).
"""

from __future__ import annotations

import json
import re
from datetime import date

import pytest

from pipeline.errors import MalformedOutput
from pipeline.extraction import obstacles, read_einvoice, read_invoice_xml
from pipeline.invoice import (
    Evidence,
    EvidencedText,
    Supplier,
    SupplierRecord,
    TenantMasterData,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.validation import Decision
from pipeline.validation.supplier import match_supplier
from pipeline.worker.interpretation import Interpretation, interpret_einvoice
from tests.support.einvoices import DATA, tax_number_only, xrechnung_einfach

SELLER = "Lieferant GmbH"
TAX_NUMBER = "201/113/40209"
IBAN = "DE02120300000000202051"
TODAY = date(2018, 3, 6)
_TAX_REGISTRATION = re.compile(
    rb"\s*<ram:SpecifiedTaxRegistration>\s*<ram:ID schemeID=\"FC\">201/113/40209</ram:ID>"
    rb"\s*</ram:SpecifiedTaxRegistration>"
)
_published = xrechnung_einfach
_tax_number_only = tax_number_only


def _master(*suppliers: SupplierRecord) -> TenantMasterData:
    return TenantMasterData(suppliers, frozenset({"EUR"}))


def _decide(xml: bytes, *suppliers: SupplierRecord) -> Interpretation:
    return interpret_einvoice(xml, _master(*suppliers), schema_version=3, today=TODAY)


def _codes(outcome: Interpretation) -> set[tuple[str, str]]:
    return {(r.code.value, r.field) for r in outcome.report.reasons}


def test_the_reader_takes_bt32_into_the_result_with_its_xml_path() -> None:
    facts = read_invoice_xml(_tax_number_only())
    assert (facts.seller_vat_id, facts.seller_tax_number) == (None, TAX_NUMBER)
    e = read_einvoice(_tax_number_only()).extraction
    assert e.supplier.vat_id is None
    assert e.supplier.tax_number is not None
    assert e.supplier.tax_number.value == TAX_NUMBER
    assert e.supplier.tax_number.evidence.match == "xml"
    assert e.supplier.tax_number.evidence.quote.endswith(
        "/ram:SellerTradeParty/ram:SpecifiedTaxRegistration/ram:ID"
    )
    assert uses_v3(e)
    assert json.loads(e.model_dump_json())["supplier"]["tax_number"]["value"] == TAX_NUMBER


def test_a_ubl_seller_tax_scheme_other_than_vat_is_its_tax_number() -> None:
    e = read_einvoice((DATA / "ubl" / "01.21a-INVOICE_ubl.xml").read_bytes()).extraction
    assert e.supplier.tax_number is not None
    assert e.supplier.tax_number.value == "04523149435"
    assert e.supplier.tax_number.evidence.quote.endswith("/cbc:CompanyID")
    assert "PartyTaxScheme" in e.supplier.tax_number.evidence.quote


def test_a_seller_without_vat_id_is_accepted_by_the_tax_number_on_file() -> None:
    on_file = SupplierRecord(SELLER, None, frozenset({IBAN}), tax_number="201 113 40209")
    outcome = _decide(_tax_number_only(), on_file)
    assert outcome.report.decision is Decision.SUCCEEDED, outcome.report.as_dict()
    assert outcome.contract == "fenceline.extraction/3"
    supplier = outcome.result()["supplier"]
    assert supplier["vat_id"] is None
    assert supplier["tax_number"]["value"] == TAX_NUMBER


def test_a_wrong_or_unknown_tax_number_reviews() -> None:
    xml = _tax_number_only()
    wrong = _decide(xml, SupplierRecord(SELLER, None, frozenset({IBAN}), tax_number="201/113/4"))
    assert wrong.report.decision is Decision.REVIEW_REQUIRED
    assert _codes(wrong) == {("tax_number_mismatch", "supplier.tax_number")}
    # the supplier is on file by its VAT id only: the tax number proves nothing
    vat_only = _decide(xml, SupplierRecord(SELLER, "DE123456789", frozenset({IBAN})))
    assert _codes(vat_only) == {("tax_number_mismatch", "supplier.tax_number")}
    # no supplier of that name: as on the VAT id path
    stranger = _decide(xml, SupplierRecord("Other GmbH", None, tax_number=TAX_NUMBER))
    assert _codes(stranger) == {("supplier_unknown", "supplier.name")}
    assert _codes(_decide(xml)) == {("supplier_unknown", "supplier.name")}


def test_a_tax_number_beside_the_vat_id_must_be_the_one_on_file_where_one_is() -> None:
    xml = _published()
    both = SupplierRecord(SELLER, "DE123456789", frozenset({IBAN}), tax_number=TAX_NUMBER)
    assert _decide(xml, both).report.decision is Decision.SUCCEEDED
    vat_only = SupplierRecord(SELLER, "DE123456789", frozenset({IBAN}))
    assert _decide(xml, vat_only).report.decision is Decision.SUCCEEDED
    other = SupplierRecord(SELLER, "DE123456789", frozenset({IBAN}), tax_number="999/999/99999")
    assert _codes(_decide(xml, other)) == {("tax_number_mismatch", "supplier.tax_number")}


def test_a_seller_with_neither_vat_id_nor_tax_number_still_reviews() -> None:
    xml = _TAX_REGISTRATION.sub(b"", _tax_number_only())
    assert read_invoice_xml(xml).seller_tax_number is None
    outcome = _decide(xml, SupplierRecord(SELLER, None, frozenset({IBAN}), tax_number=TAX_NUMBER))
    assert outcome.report.decision is Decision.REVIEW_REQUIRED
    assert ("missing_field", "supplier.vat_id") in _codes(outcome)
    assert ("einvoice_not_holdable", "supplier.vat_id") in _codes(outcome)


def test_a_registration_statement_without_a_number_is_no_tax_number() -> None:
    """Peppol's Swedish sellers state their F-tax approval where BT-32 goes (SE-R-005):
    the same words on every Swedish seller's invoice, so it identifies none of them and
    is not read as a tax number, in UBL (the vendored Peppol example) or CII."""
    ubl = read_einvoice((DATA / "ubl" / "BIS_Billing_30-Forskott_slutreglering.xml").read_bytes())
    assert b"F-skatt" in (DATA / "ubl" / "BIS_Billing_30-Forskott_slutreglering.xml").read_bytes()
    assert ubl.extraction.supplier.tax_number is None
    assert ubl.extraction.supplier.vat_id is not None  # identified by its VAT id
    statement = _tax_number_only().replace(TAX_NUMBER.encode(), "Godkänd för F-skatt".encode())
    assert statement != _tax_number_only()
    assert read_invoice_xml(statement).seller_tax_number is None
    on_file = SupplierRecord(SELLER, None, frozenset({IBAN}), tax_number=TAX_NUMBER)
    outcome = _decide(statement, on_file)
    assert outcome.report.decision is Decision.REVIEW_REQUIRED
    assert ("missing_field", "supplier.vat_id") in _codes(outcome)


def test_contract_v2_still_counts_a_missing_vat_id_as_an_obstacle() -> None:
    facts = read_invoice_xml(_tax_number_only())
    assert [o.code for o in obstacles(facts)] == ["no_vat_id"]
    assert [o.code for o in obstacles(facts, v3=True)] == []


def test_two_suppliers_of_one_name_are_told_apart_by_the_tax_number() -> None:
    first = SupplierRecord(SELLER, None, tax_number="111/111/11111")
    second = SupplierRecord(SELLER, None, tax_number=TAX_NUMBER)
    master = _master(first, second)
    assert match_supplier(SELLER, master, None, "201/113/40209") is second
    assert match_supplier(SELLER, master, None, "111 111 11111") is first
    # with a VAT id stated, the VAT id decides
    vat = SupplierRecord(SELLER, "DE123456789")
    assert match_supplier(SELLER, _master(second, vat), "DE123456789", TAX_NUMBER) is vat


def test_no_model_may_write_a_tax_number() -> None:
    assert "tax_number" not in extraction_json_schema()["properties"]["supplier"]["properties"]
    e = read_einvoice(_published()).extraction
    answer = json.loads(e.model_dump_json())
    assert "tax_number" in answer["supplier"]
    with pytest.raises(MalformedOutput, match=r"supplier\.tax_number"):
        parse_extraction(json.dumps(answer))
    del answer["supplier"]["tax_number"]
    assert parse_extraction(json.dumps(answer)).supplier.tax_number is None


def test_a_supplier_without_tax_number_dumps_as_under_contract_v2() -> None:
    ev = Evidence(page=1, start=0, end=4, quote="Acme")
    plain = Supplier(name=EvidencedText(value="Acme", evidence=ev), vat_id=None)
    assert set(json.loads(plain.model_dump_json())) == {"name", "vat_id"}
