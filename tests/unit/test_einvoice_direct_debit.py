"""A direct debit's mandate reference and debited account (EN 16931 BG-19: BT-89, BT-91)
are held from an e-invoice's XML (issue 44): contract v3's ``mandate_reference`` and
``debited_account``, each with its XML path as evidence, set only with a direct debit
payment means (49, 59). The debited account is sealed where results are stored
(``pipeline.sealed_results``; tests/integration/test_encryption_at_rest.py).

The UBL cases are KoSIT's 01.17a (tests/data/einvoices/payable, see its NOTICE) with its
transfer replaced by the payment means of CEN's EN 16931 example 5
(``ubl/examples/ubl-tc434-example5.xml`` of ConnectingEurope/eInvoicing-EN16931, EUPL
1.2: a direct debit, 49, under mandate 123456 from account DK1212341234123412), copied
below as it is there; the CII case is 01.17a's CII with a SEPA direct debit written in.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest

from benchmarks.corpus.records import truth_of
from benchmarks.eval.truth import truth_from_extraction
from pipeline.extraction import read_einvoice, read_invoice_xml
from pipeline.invoice import V3_FIELDS, Extraction, binding_v3_fields, within_v1
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.sealed_results import SEALED_FIELDS
from pipeline.validation import Decision
from tests.support.einvoices import decide_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "payable"
UBL = DATA / "01.17a-INVOICE_ubl.xml"
CII = DATA / "01.17a-INVOICE_uncefact.xml"

#: The payment means of CEN's example 5, as it is there.
EXAMPLE_5_MEANS = b"""<cac:PaymentMeans>
        <cbc:PaymentMeansCode>49</cbc:PaymentMeansCode>
        <cbc:PaymentID>Payref1</cbc:PaymentID>
        <cac:PaymentMandate>
            <cbc:ID>123456</cbc:ID>
            <cac:PayerFinancialAccount>
                <cbc:ID>DK1212341234123412</cbc:ID>
            </cac:PayerFinancialAccount>
        </cac:PaymentMandate>
    </cac:PaymentMeans>"""
_UBL_MEANS = re.compile(rb"<cac:PaymentMeans>.*?</cac:PaymentMeans>", re.DOTALL)
_CII_MEANS = re.compile(
    rb"<ram:SpecifiedTradeSettlementPaymentMeans>.*?</ram:SpecifiedTradeSettlementPaymentMeans>",
    re.DOTALL,
)
_CII_TERMS = b"<ram:Description>Zahlbar sofort ohne Abzug.</ram:Description>"


def _ubl(means: bytes) -> bytes:
    xml, n = _UBL_MEANS.subn(means, UBL.read_bytes())
    assert n == 1
    return xml


def _cii(code: str = "59") -> bytes:
    means = (
        b"<ram:SpecifiedTradeSettlementPaymentMeans><ram:TypeCode>%s</ram:TypeCode>"
        b"<ram:PayerPartyDebtorFinancialAccount><ram:IBANID>DE02 1203 0000 0000 2020 51"
        b"</ram:IBANID></ram:PayerPartyDebtorFinancialAccount>"
        b"</ram:SpecifiedTradeSettlementPaymentMeans>" % code.encode()
    )
    xml, n = _CII_MEANS.subn(means, CII.read_bytes())
    assert n == 1 and xml.count(_CII_TERMS) == 1
    return xml.replace(
        _CII_TERMS, _CII_TERMS + b"<ram:DirectDebitMandateID>M-29901-1</ram:DirectDebitMandateID>"
    )


def _decide(xml: bytes) -> tuple[Decision, list[tuple[str, str]], Extraction]:
    return decide_xml(xml, currencies=frozenset({"EUR"}), ibans=False, today=date(2016, 4, 5))


def test_a_direct_debit_holds_its_mandate_and_debited_account_from_ubl() -> None:
    decision, reasons, e = _decide(_ubl(EXAMPLE_5_MEANS))
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.payment_means is not None and e.payment_means.value == "49"
    assert e.mandate_reference is not None and e.debited_account is not None
    assert (e.mandate_reference.value, e.debited_account.value) == ("123456", "DK1212341234123412")
    assert e.mandate_reference.evidence.match == "xml"
    assert e.mandate_reference.evidence.quote == (
        "/ubl:Invoice/cac:PaymentMeans/cac:PaymentMandate/cbc:ID"
    )
    assert e.debited_account.evidence.quote == (
        "/ubl:Invoice/cac:PaymentMeans/cac:PaymentMandate/cac:PayerFinancialAccount/cbc:ID"
    )
    dumped = json.loads(e.model_dump_json())
    assert dumped["mandate_reference"]["value"] == "123456"
    assert dumped["debited_account"]["value"] == "DK1212341234123412"


def test_a_sepa_direct_debit_holds_its_mandate_and_debited_account_from_cii() -> None:
    decision, reasons, e = _decide(_cii())
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.mandate_reference is not None and e.debited_account is not None
    assert e.mandate_reference.value == "M-29901-1"
    assert e.debited_account.value == "DE02120300000000202051"  # written with spaces
    assert e.mandate_reference.evidence.quote.endswith(
        "ram:SpecifiedTradePaymentTerms/ram:DirectDebitMandateID"
    )
    assert e.debited_account.evidence.quote.endswith(
        "ram:SpecifiedTradeSettlementPaymentMeans/ram:PayerPartyDebtorFinancialAccount/ram:IBANID"
    )


def test_a_mandate_beside_a_transfer_is_not_held() -> None:
    """A transfer (58) names no account of the buyer's to debit: the mandate the XML
    states all the same is left out, as the payment means is."""
    transfer = EXAMPLE_5_MEANS.replace(b">49<", b">58<")
    facts = read_invoice_xml(_ubl(transfer))
    assert (facts.mandate_reference, facts.debited_account) == ("123456", "DK1212341234123412")
    e = read_einvoice(_ubl(transfer)).extraction
    assert (e.payment_means, e.mandate_reference, e.debited_account) == (None, None, None)
    assert {"mandate_reference", "debited_account"}.isdisjoint(json.loads(e.model_dump_json()))
    e = read_einvoice(_cii("54")).extraction  # a card: collected, but no direct debit
    assert e.payment_means is not None and e.payment_means.value == "54"
    assert (e.mandate_reference, e.debited_account) == (None, None)


def test_no_model_writes_them_and_the_debited_account_is_sealed() -> None:
    assert {"mandate_reference", "debited_account"} <= set(V3_FIELDS)
    schema = json.dumps(extraction_json_schema())
    assert "mandate_reference" not in schema and "debited_account" not in schema
    assert "debited_account" in SEALED_FIELDS
    assert "mandate_reference" not in SEALED_FIELDS  # the supplier's own reference


def test_a_v1_job_cannot_drop_a_direct_debit() -> None:
    """The payment means already binds (the ERP must not pay by transfer); its mandate
    and account go with it."""
    _, _, e = _decide(_ubl(EXAMPLE_5_MEANS))
    assert "payment_means" in binding_v3_fields(e)  # 01.17a's rounding binds too
    assert not {"mandate_reference", "debited_account"} & set(binding_v3_fields(e))
    with pytest.raises(ValueError, match="payment_means"):
        within_v1(e)


def test_the_eval_truth_states_them() -> None:
    """The corpus dataset line (benchmarks/corpus/records.py) and a truth taken from an
    extraction state both, so a reading without them is scored as missing them."""
    xml = _cii()
    truth = truth_of(read_invoice_xml(xml))
    assert (truth["payment_means"], truth["mandate_reference"], truth["debited_account"]) == (
        "59", "M-29901-1", "DE02120300000000202051",
    )  # fmt: skip
    from_extraction = truth_from_extraction(read_einvoice(xml).extraction)
    assert from_extraction.mandate_reference == "M-29901-1"
    assert from_extraction.debited_account == "DE02120300000000202051"
    transfer = truth_of(read_invoice_xml(_ubl(EXAMPLE_5_MEANS.replace(b">49<", b">58<"))))
    assert "mandate_reference" not in transfer and "debited_account" not in transfer
