"""A job's ``schema_version`` decides what its e-invoice result may hold (issue 44).

A v3 job gets every contract v3 value the XML states. A v1 job whose XML states a v3
value that changes what is payable or who is paid goes to review with
``contract_v3_required`` naming each; one whose v3 values are merely additional (a tax
number beside a VAT id) gets the result less them, a result without v3 values.

The files are vendored e-invoices (tests/data/einvoices, see each folder's NOTICE).
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.extraction import CONTRACT_V2
from pipeline.invoice import (
    CONTRACT_V3,
    SCHEMA_V1,
    SCHEMA_V3,
    EvidencedAmount,
    ReasonCode,
    SupplierRecord,
    TenantMasterData,
    binding_v3_fields,
    uses_v3,
    within_v1,
)
from pipeline.validation import Decision, contract_version_reasons
from pipeline.worker.interpretation import interpret_einvoice
from tests.support.einvoices import decide_xml, tax_number_only, xrechnung_einfach

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
#: KoSIT 01.21a: a document-level delivery charge of 25.00 (BG-21).
CHARGE = DATA / "ubl" / "01.21a-INVOICE_ubl.xml"
#: Peppol's final invoice after an advance payment: prepaid and amount due.
PREPAID = DATA / "ubl" / "BIS_Billing_30-Forskott_slutreglering.xml"
#: Peppol's credit note: document and line allowances and charges, price bases, a prepaid
#: and a rounding amount (gross 10835, due 10000).
CREDIT = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
#: KoSIT 01.17a: gross 336.9, rounding 0.01, amount due 336.91.
ROUNDED = DATA / "payable" / "01.17a-INVOICE_ubl.xml"


def _v3_required(reasons: list[tuple[str, str]]) -> list[str]:
    return [field for code, field in reasons if code == ReasonCode.CONTRACT_V3_REQUIRED]


def test_a_v3_job_gets_the_charge_and_a_v1_job_goes_to_review_naming_it() -> None:
    xml = CHARGE.read_bytes()
    decision, reasons, e = decide_xml(xml, schema_version=SCHEMA_V3)
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert [(a.kind, a.amount) for a in e.allowances_charges] == [("charge", Decimal("25.00"))]
    decision, reasons, e = decide_xml(xml, schema_version=SCHEMA_V1)
    assert decision is Decision.REVIEW_REQUIRED
    assert _v3_required(reasons) == ["allowances_charges"]
    # Kept as read for the reviewer, and labelled for what it holds.
    assert e.allowances_charges and uses_v3(e)


def test_a_v1_job_with_an_amount_due_below_the_gross_goes_to_review() -> None:
    decision, reasons, _ = decide_xml(PREPAID.read_bytes(), schema_version=SCHEMA_V1)
    assert decision is Decision.REVIEW_REQUIRED
    assert _v3_required(reasons) == ["prepaid_amount", "amount_due"]
    decision, reasons, _ = decide_xml(PREPAID.read_bytes(), schema_version=SCHEMA_V3)
    assert _v3_required(reasons) == []


def test_a_v1_job_on_a_credit_note_with_line_entries_names_each() -> None:
    decision, reasons, _ = decide_xml(CREDIT.read_bytes(), schema_version=SCHEMA_V1)
    assert decision is Decision.REVIEW_REQUIRED
    assert _v3_required(reasons) == [
        "document_type",
        "allowances_charges",
        "prepaid_amount",
        "rounding_amount",
        "amount_due",
        "line_items[0].allowances_charges",
        "line_items[0].price_basis_quantity",
        "line_items[1].price_basis_quantity",
    ]


def test_a_tax_number_beside_a_vat_id_is_left_out_of_a_v1_result() -> None:
    xml = xrechnung_einfach()
    decision, reasons, e = decide_xml(xml, schema_version=SCHEMA_V1)
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.supplier.vat_id is not None and e.supplier.tax_number is None
    assert "tax_number" not in json.loads(e.model_dump_json())["supplier"]
    assert not uses_v3(e)
    _, _, v3 = decide_xml(xml, schema_version=SCHEMA_V3)
    assert v3.supplier.tax_number is not None and v3.supplier.tax_number.value == "201/113/40209"


def test_a_supplier_known_by_its_tax_number_alone_needs_contract_v3() -> None:
    decision, reasons, e = decide_xml(tax_number_only(), schema_version=SCHEMA_V1)
    assert decision is Decision.REVIEW_REQUIRED
    assert "supplier.tax_number" in _v3_required(reasons)
    assert e.supplier.tax_number is not None


def test_the_report_records_the_contract_its_result_holds() -> None:
    xml = xrechnung_einfach()
    master = TenantMasterData(
        (SupplierRecord("Lieferant GmbH", "DE123456789", frozenset({"DE02120300000000202051"})),),
        frozenset({"EUR"}),
    )
    day = date(2018, 3, 6)  # the day after its issue
    v1 = interpret_einvoice(xml, master, schema_version=SCHEMA_V1, today=day)
    v3 = interpret_einvoice(xml, master, schema_version=SCHEMA_V3, today=day)
    assert v1.report.decision is Decision.SUCCEEDED, v1.report.as_dict()
    # No v3 value left: a result as any other read from XML without them.
    assert (v1.contract, v1.report.schema_version) == (CONTRACT_V2, CONTRACT_V2)
    assert (v3.contract, v3.report.schema_version) == (CONTRACT_V3, CONTRACT_V3)
    assert "tax_number" not in v1.result()["supplier"]
    assert v3.result()["supplier"]["tax_number"]["value"] == "201/113/40209"


def test_an_amount_due_equal_to_the_gross_is_additional() -> None:
    _, _, e = decide_xml(ROUNDED.read_bytes())
    assert binding_v3_fields(e) == ("rounding_amount", "amount_due")
    assert e.gross_total is not None and e.amount_due is not None
    even = e.model_copy(
        update={
            "rounding_amount": None,
            "amount_due": EvidencedAmount(
                value=e.gross_total.value, evidence=e.amount_due.evidence
            ),
        }
    )
    assert binding_v3_fields(even) == ()
    assert within_v1(even).amount_due is None


def test_within_v1_refuses_to_drop_a_binding_value() -> None:
    _, _, e = decide_xml(CHARGE.read_bytes())
    with pytest.raises(ValueError, match="allowances_charges"):
        within_v1(e)


def test_a_v3_job_has_no_contract_reason() -> None:
    _, _, e = decide_xml(CHARGE.read_bytes())
    assert contract_version_reasons(e, SCHEMA_V3) == ()
    [reason] = contract_version_reasons(e, SCHEMA_V1)
    assert reason.rule == "validation.contract_v3_required"
    assert "schema_version 3" in reason.detail
