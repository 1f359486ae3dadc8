"""The payee rule: an invoice without IBAN is accepted only where it states no account to
pay (pipeline/validation/payee.py, docs/extraction.md "No IBAN: the payee on file").

The ERP then pays the supplier's account on file; a null beside anything IBAN-like printed,
or an account that is no IBAN, stays in review.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from pipeline.extraction import read_einvoice, read_invoice_xml
from pipeline.extraction.candidates import iban_candidates
from pipeline.invoice import ReasonCode, SupplierRecord, TenantMasterData
from pipeline.validation import Decision, validate
from pipeline.validation.payee import printed_account_labels, printed_iban_marks
from pipeline.worker.interpretation import interpret_einvoice
from tests.support.einvoices import DATA, decide_xml, without_cvd

#: A Peppol invoice that reads SUCCEEDED, paid to its IBAN by credit transfer (30).
UBL = DATA / "ubl" / "ubl-tc434-example9.xml"
#: A CII invoice (KoSIT 02.01a, less its CVD code: without_cvd) that reads SUCCEEDED, two
#: transfers to IBANs.
CII = DATA / "currencies" / "02.01a-cvd_INVOICE_uncefact.xml"
_UBL_MEANS = re.compile(rb"\s*<cac:PaymentMeans>.*?</cac:PaymentMeans>", re.S)
_CII_MEANS = re.compile(
    rb"\s*<ram:SpecifiedTradeSettlementPaymentMeans>.*?</ram:SpecifiedTradeSettlementPaymentMeans>",
    re.S,
)
#: The IBAN moved to BT-84's place for a national account, after the account name.
_CII_IBAN = re.compile(
    rb"<ram:IBANID>[^<]*</ram:IBANID>(\s*(?:<!--[^>]*-->\s*)?<ram:AccountName>[^<]*"
    rb"</ram:AccountName>)"
)


@pytest.fixture(scope="module")
def inv() -> GeneratedInvoice:
    """A generated invoice whose page prints its IBAN on a line of its own with a BIC."""
    for seed in range(200):
        candidate = generate_invoice(seed, line_items=3)
        if "IBAN: " in candidate.ocr_text and candidate.truth.iban is not None:
            return candidate
    raise AssertionError("no generated invoice printing 'IBAN: '")


def _page_with(inv: GeneratedInvoice, payment: str) -> str:
    """The page with its payment block (the IBAN line and a bank line above it) replaced
    by ``payment``, padded to the same length so every other field's evidence keeps its
    offsets; the rest of the page prints no account."""
    text = inv.ocr_text
    iban_line = text.index("IBAN: ")
    start = text.rfind("\n", 0, text.rfind("\n", 0, iban_line)) + 1
    end = text.index("\n", iban_line)
    assert len(payment) <= end - start
    page = text[:start] + payment.ljust(end - start) + text[end:]
    rest = text[:start] + " " * (end - start) + text[end:]
    assert printed_iban_marks(rest) == () and printed_account_labels(rest) == ()
    return page


def _validate(inv: GeneratedInvoice, text: str, **changes: Any) -> Any:
    extraction = inv.truth.model_copy(update={"iban": None, **changes})
    return validate(extraction, text, inv.master_data, today=inv.today)


# --- the text path ----------------------------------------------------------------------


def test_a_null_iban_beside_a_printed_one_stays_in_review(inv: GeneratedInvoice) -> None:
    report = _validate(inv, inv.ocr_text)
    assert report.decision is Decision.REVIEW_REQUIRED
    [reason] = [r for r in report.reasons if r.field == "iban"]
    assert (reason.code, reason.rule) == (ReasonCode.MISSING_FIELD, "validation.iban_absent")
    assert report.proofs == ()


@pytest.mark.parametrize(
    "payment",
    [
        "IBAN: see your vendor record",  # the label alone
        "Pay to DE89 3704 0044 0532 0130 00",  # grouped, unlabelled
        "Pay to DE89370400440532013000",  # compact, unlabelled
        "Pay to DE89-3704-0044-0532-0130-00",  # hyphenated
        "Pay to DE89 3704 0044\n0532 0130 00",  # broken over two lines
        "I.B.A.N. on request",  # a dotted label
        "\u0406\u0412\u0410N: on request",  # Cyrillic lookalikes of 'IBAN'
        "lBAN: 0E89 3704 0044",  # an OCR'd label, a misread number
    ],
)
def test_anything_iban_like_printed_keeps_the_null_in_review(
    inv: GeneratedInvoice, payment: str
) -> None:
    report = _validate(inv, _page_with(inv, payment))
    assert (ReasonCode.MISSING_FIELD, "iban") in {(r.code, r.field) for r in report.reasons}


def test_a_page_printing_no_account_is_accepted_with_its_proof(inv: GeneratedInvoice) -> None:
    report = _validate(inv, _page_with(inv, "Thank you for your business."))
    assert report.decision is Decision.SUCCEEDED, report.reasons
    assert [p.as_dict()["rule"] for p in report.proofs] == ["validation.iban_absent"]


@pytest.mark.parametrize(
    ("payment", "label"),
    [
        ("Bankgiro: 5050-1055", "BANKGIRO"),
        ("Kontonummer 1234567, BLZ 37040044", "KONTONUMMER"),
        ("Sort code 20-00-00", "SORT CODE"),
        ("BIC: NWBKGB2X", "BIC"),
    ],
)
def test_a_printed_account_that_is_no_iban_goes_to_review_naming_it(
    inv: GeneratedInvoice, payment: str, label: str
) -> None:
    report = _validate(inv, _page_with(inv, payment))
    [reason] = [r for r in report.reasons if r.field == "iban"]
    assert reason.code is ReasonCode.PAYEE_ACCOUNT_NOT_IBAN
    assert reason.rule == "validation.payee_account_not_iban"
    assert label in reason.detail


def test_a_credit_note_still_needs_no_account(inv: GeneratedInvoice) -> None:
    report = _validate(inv, inv.ocr_text, document_type="credit_note")
    assert not [r for r in report.reasons if r.field == "iban"]
    assert report.proofs == ()


@pytest.mark.parametrize(
    "text",
    [
        "USt-IdNr. DE123456789",
        "BTW NL123456789B01",
        "TVA FR12345678901",
        "Invoice RE-2024-000123, order 4500012345",
        "Reference 2015 0483 0000 0000",
    ],
)
def test_vat_ids_and_numbers_are_not_iban_shaped(text: str) -> None:
    assert printed_iban_marks(text) == ()
    assert printed_account_labels(text) == ()


def test_every_iban_the_grammar_offers_is_a_mark() -> None:
    """A null answered beside an offered IBAN candidate is never taken as proven absent."""
    pages = [generate_invoice(seed).ocr_text for seed in range(40)]
    pages += ["Konto NO93 8601 1117 947", "ref DE89370400440532013000xyz", "BE71096123456769"]
    for page in pages:
        if iban_candidates(page):
            assert printed_iban_marks(page), page


def test_marks_never_repeat_the_printed_iban() -> None:
    assert printed_iban_marks("IBAN DE89 3704 0044 0532 0130 00") == ("IBAN", "DE89…")


# --- the XML path -----------------------------------------------------------------------


def test_ubl_without_payment_means_succeeds_with_a_null_iban() -> None:
    xml = UBL.read_bytes()
    stripped = _UBL_MEANS.sub(b"", xml)
    assert stripped != xml
    decision, reasons, extraction = decide_xml(stripped)
    assert (decision, reasons, extraction.iban) == (Decision.SUCCEEDED, [], None)
    facts = read_invoice_xml(stripped)
    assert facts.seller_name is not None and facts.issue_date is not None
    master = TenantMasterData(
        (SupplierRecord(facts.seller_name, facts.seller_vat_id or "", frozenset()),),
        frozenset({facts.currency or "EUR"}),
    )
    got = interpret_einvoice(
        stripped, master, schema_version=3, today=facts.issue_date + timedelta(days=1)
    )
    assert [p.rule for p in got.report.proofs] == ["validation.iban_absent"]
    assert got.report.as_dict()["proofs"][0]["field"] == "iban"


def test_cii_without_payment_means_succeeds_with_a_null_iban() -> None:
    xml = without_cvd(CII.read_bytes())
    stripped = _CII_MEANS.sub(b"", xml)
    assert stripped != xml
    decision, reasons, extraction = decide_xml(stripped)
    assert (decision, reasons, extraction.iban) == (Decision.SUCCEEDED, [], None)


def test_a_ubl_bankgiro_not_on_file_goes_to_review() -> None:
    """A bankgiro the register can hold is held against it: the seller on file has none,
    so it is not registered (tests/unit/test_national_accounts.py: the one on file)."""
    xml = UBL.read_bytes()
    bankgiro = xml.replace(b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>5050-1055</cbc:ID>")
    bankgiro = bankgiro.replace(b"<cbc:ID>RABONL2U</cbc:ID>", b"<cbc:ID>SE:BANKGIRO</cbc:ID>")
    assert bankgiro.count(b"SE:BANKGIRO") == 1
    decision, reasons, extraction = decide_xml(bankgiro)
    assert decision is Decision.REVIEW_REQUIRED
    assert reasons == [("payee_account_not_registered", "payee_account")]
    assert extraction.iban is None


def test_the_reason_names_the_national_account() -> None:
    xml = UBL.read_bytes().replace(
        b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>5050-1055</cbc:ID>"
    )
    assert read_invoice_xml(xml).payee_accounts == ("5050-1055 (bank RABONL2U)",)
    [reason] = read_einvoice(xml).reasons
    assert reason.rule == "einvoice.payee_account_not_iban"
    assert "5050-1055 (bank RABONL2U)" in reason.detail
    facts = read_invoice_xml(xml)
    assert facts.seller_name is not None and facts.issue_date is not None
    master = TenantMasterData(
        (SupplierRecord(facts.seller_name, facts.seller_vat_id or "", frozenset()),),
        frozenset({facts.currency or "EUR"}),
    )
    report = interpret_einvoice(
        xml, master, schema_version=3, today=facts.issue_date + timedelta(days=1)
    ).report
    assert report.proofs == ()  # no proof that it states no account beside the reason


def test_a_cii_proprietary_account_goes_to_review() -> None:
    xml = without_cvd(CII.read_bytes())
    national = _CII_IBAN.sub(rb"\1<ram:ProprietaryID>12345678</ram:ProprietaryID>", xml)
    assert national.count(b"<ram:ProprietaryID>12345678") == 2
    decision, reasons, extraction = decide_xml(national)
    assert decision is Decision.REVIEW_REQUIRED
    assert reasons == [("payee_account_not_iban", "iban")]
    assert extraction.iban is None
