"""An e-invoice the supplier collects by card or direct debit needs no IBAN (issue 44):
its payment means (EN 16931 BT-81, UNTDID 4461 48/49/54/55/59) is held as contract v3's
``payment_means``, and the IBAN the policy requires of an invoice paid by transfer is not
required of it. Nor of a transfer that names no account at all (the ERP pays the
supplier's account on file, pipeline/validation/payee.py); one naming an account that is
no IBAN reviews (tests/unit/test_payee.py).

The cases are KoSIT's 01.17a (tests/data/einvoices/payable, see its NOTICE), paid by
transfer (58) to an IBAN, with its payment means rewritten.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest

from pipeline.extraction import read_einvoice
from pipeline.invoice import Extraction, uses_v3
from pipeline.validation import Decision
from tests.support.einvoices import decide_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices" / "payable"
UBL = DATA / "01.17a-INVOICE_ubl.xml"
CII = DATA / "01.17a-INVOICE_uncefact.xml"
_UBL_MEANS = re.compile(rb"<cac:PaymentMeans>.*?</cac:PaymentMeans>", re.DOTALL)
_CII_MEANS = re.compile(
    rb"<ram:SpecifiedTradeSettlementPaymentMeans>.*?</ram:SpecifiedTradeSettlementPaymentMeans>",
    re.DOTALL,
)


def _ubl(*codes: str) -> bytes:
    means = b"".join(
        b"<cac:PaymentMeans><cbc:PaymentMeansCode>"
        + code.encode()
        + b"</cbc:PaymentMeansCode></cac:PaymentMeans>"
        for code in codes
    )
    xml, n = _UBL_MEANS.subn(means, UBL.read_bytes())
    assert n == 1
    return xml


def _cii(code: str) -> bytes:
    means = (
        b"<ram:SpecifiedTradeSettlementPaymentMeans><ram:TypeCode>"
        + code.encode()
        + b"</ram:TypeCode></ram:SpecifiedTradeSettlementPaymentMeans>"
    )
    xml, n = _CII_MEANS.subn(means, CII.read_bytes())
    assert n == 1
    return xml


def _decide_collected(xml: bytes) -> tuple[Decision, list[tuple[str, str]], Extraction]:
    return decide_xml(xml, currencies=frozenset({"EUR"}), ibans=False, today=date(2016, 4, 5))


@pytest.mark.parametrize(
    ("xml", "code"),
    [
        (_ubl("59"), "59"),
        (_ubl("48"), "48"),
        (_cii("59"), "59"),
        (_cii("54"), "54"),
    ],
    ids=["ubl-sepa-direct-debit", "ubl-card", "cii-sepa-dd", "cii-card"],
)
def test_an_invoice_collected_by_card_or_direct_debit_needs_no_iban(xml: bytes, code: str) -> None:
    decision, reasons, e = _decide_collected(xml)
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.iban is None
    assert e.payment_means is not None and e.payment_means.value == code
    assert e.payment_means.evidence.quote.endswith(("cbc:PaymentMeansCode", "ram:TypeCode"))
    assert json.loads(e.model_dump_json())["payment_means"]["value"] == code
    assert uses_v3(e)


def test_two_collections_read_as_the_first_and_review_for_en16931() -> None:
    """UBL states several payment means only with one code (EN 16931's UBL-SR-47):
    direct debit beside card is read as the first, and reviews for that rule alone."""
    decision, reasons, e = _decide_collected(_ubl("49", "59"))
    assert (decision, reasons) == (Decision.REVIEW_REQUIRED, [("einvoice_invalid", "rules")])
    assert e.payment_means is not None and e.payment_means.value == "49"


@pytest.mark.parametrize(
    "xml", [_ubl("1"), _cii("10")], ids=["ubl-undefined", "cii-cash"]
)  # fmt: skip
def test_any_other_payment_means_stating_no_account_is_paid_to_the_one_on_file(
    xml: bytes,
) -> None:
    """An undefined means or cash that names no account cannot redirect a payment: the
    ERP pays the supplier's account on file (the delivery's ``payee_account: "on_file"``)."""
    decision, reasons, e = _decide_collected(xml)
    assert (decision, reasons) == (Decision.SUCCEEDED, [])
    assert e.payment_means is None and e.iban is None


@pytest.mark.parametrize(
    ("xml", "rule"),
    [(_ubl("58"), "BR-61"), (_ubl("30"), "BR-61"), (_ubl("59", "58"), "BR-61"),
     (_cii("58"), "CII-SR-470")],
    ids=["ubl-sepa-transfer", "ubl-transfer", "ubl-debit-or-transfer", "cii-sepa-transfer"],
)  # fmt: skip
def test_a_transfer_that_names_no_account_breaks_en16931(xml: bytes, rule: str) -> None:
    """A credit transfer must state the account to pay (EN 16931 BR-61; in CII its
    syntax rule wants the account or the payee's id): such an XML reviews for the rules,
    and nothing is paid to the account on file on its say."""
    decision, reasons, _ = _decide_collected(xml)
    assert (decision, reasons) == (Decision.REVIEW_REQUIRED, [("einvoice_invalid", "rules")])
    [reason] = read_einvoice(xml).reasons
    assert rule in reason.detail


def test_an_invoice_paid_by_transfer_dumps_no_payment_means() -> None:
    e = read_einvoice(UBL.read_bytes()).extraction
    assert e.payment_means is None
    assert e.iban is not None and e.iban.value == "DE79000000001234567890"
    assert "payment_means" not in json.loads(e.model_dump_json())
