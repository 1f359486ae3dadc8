"""A national account to pay (EN 16931 BT-84 that is no IBAN: a Swedish bankgiro) held
against the supplier register (pipeline/invoice/national_accounts.py, contract v3's
``payee_account``, validation's ``payee_account_not_registered``; docs/einvoices.md "The
payee").

Accepted exactly where the account the XML states is on file for its supplier, as an
IBAN on file is; one not on file, or a supplier with none on file, goes to review.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from pipeline.errors import MalformedOutput
from pipeline.extraction import read_einvoice, read_invoice_xml
from pipeline.extraction.einvoice_facts import AccountFacts
from pipeline.invoice import (
    SCHEMA_V1,
    Extraction,
    ReasonCode,
    SupplierRecord,
    TenantMasterData,
    extraction_json_schema,
    parse_extraction,
)
from pipeline.invoice.national_accounts import national_account, parse_account
from pipeline.jobs.explain_result import evidenced_fields
from pipeline.validation import Decision
from pipeline.worker.interpretation import Interpretation, interpret_einvoice
from tests.support.einvoices import DATA, without_cvd

#: A Peppol invoice that reads SUCCEEDED, paid to its IBAN by credit transfer (30).
UBL = DATA / "ubl" / "ubl-tc434-example9.xml"
#: A CII payment means' IBAN, moved to BT-84's place for a national account.
_CII_IBAN = re.compile(
    rb"<ram:IBANID>[^<]*</ram:IBANID>(\s*(?:<!--[^>]*-->\s*)?<ram:AccountName>[^<]*"
    rb"</ram:AccountName>)"
)


def _bankgiro(account: bytes = b"5050-1055", scheme: bytes = b"SE:BANKGIRO") -> bytes:
    """The invoice paid to a national account as Peppol's Swedish examples state one: the
    ID the account, the bank branch's ID its scheme."""
    xml = UBL.read_bytes()
    out = xml.replace(b"<cbc:ID>NL13RABO0377815500</cbc:ID>", b"<cbc:ID>" + account + b"</cbc:ID>")
    out = out.replace(b"<cbc:ID>RABONL2U</cbc:ID>", b"<cbc:ID>" + scheme + b"</cbc:ID>")
    assert out.count(account) == 1 and out.count(scheme) == 1
    return out


def _decide(xml: bytes, *accounts: str, ibans: frozenset[str] = frozenset()) -> Interpretation:
    """``xml`` for a tenant that has its seller on file with ``accounts`` (stored as
    ``fenceline suppliers add --account`` stores them)."""
    facts = read_invoice_xml(xml)
    assert facts.seller_name is not None and facts.issue_date is not None
    seller = SupplierRecord(
        facts.seller_name,
        facts.seller_vat_id,
        ibans,
        accounts=frozenset(parse_account(a) for a in accounts),
    )
    master = TenantMasterData((seller,), frozenset({facts.currency or "EUR"}))
    return interpret_einvoice(
        xml, master, schema_version=3, today=facts.issue_date + timedelta(days=1)
    )


def _codes(got: Interpretation) -> list[str]:
    return [r.code.value for r in got.report.reasons]


# --- the canonical form -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("SE:BANKGIRO:5050-1055", "SE:BANKGIRO:50501055"),
        ("se:bankgiro:5050 1055", "SE:BANKGIRO:50501055"),
        (" SE:PLUSGIRO:3338929 ", "SE:PLUSGIRO:3338929"),
        ("NO:KONTO:1234.56.78903".replace(".", ""), "NO:KONTO:12345678903"),
    ],
)
def test_an_account_is_stored_canonical(given: str, canonical: str) -> None:
    assert parse_account(given) == canonical


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("50501055", "not SCHEME:ID"),
        (":50501055", "not SCHEME:ID"),
        ("BANKGIRO:50501055", "not a country code"),
        ("SE:BANK GIRO:50501055", "not a country code"),
        ("SE:BANKGIRO:", "not 2-34 letters or digits"),
        ("SE:BANKGIRO:5050/1055", "not 2-34 letters or digits"),
    ],
)
def test_a_malformed_account_is_refused(given: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_account(given)


def test_no_scheme_or_a_bank_names_no_account_the_register_holds() -> None:
    assert national_account(None, "5050-1055") is None
    assert national_account("RABONL2U", "5050-1055") is None
    assert national_account("se:bankgiro", "5050-1055") == "SE:BANKGIRO:50501055"


# --- the reader ---------------------------------------------------------------------------


def test_the_ubl_reader_gives_the_account_and_its_scheme() -> None:
    facts = read_invoice_xml(_bankgiro())
    [account] = facts.stated_accounts
    assert (account.id, account.scheme) == ("5050-1055", "SE:BANKGIRO")
    assert account.path.endswith("PayeeFinancialAccount/cbc:ID")
    assert facts.ibans == ()
    extraction = read_einvoice(_bankgiro()).extraction
    assert extraction.payee_account is not None
    assert extraction.payee_account.model_dump() == {
        "scheme": "SE:BANKGIRO",
        "id": "50501055",
        "evidence": {
            "page": 1,
            "start": 0,
            "end": 0,
            "quote": account.path,
            "match": "xml",
        },
    }
    assert extraction.iban is None
    assert "payee_account" in extraction.model_dump()


def test_a_schemeid_names_the_account_too() -> None:
    xml = _bankgiro().replace(
        b"<cbc:ID>5050-1055</cbc:ID>", b'<cbc:ID schemeID="SE:PLUSGIRO">3338929</cbc:ID>'
    )
    assert read_invoice_xml(xml).stated_accounts[0].scheme == "SE:PLUSGIRO"
    payee = read_einvoice(xml).extraction.payee_account
    assert payee is not None and payee.canonical == "SE:PLUSGIRO:3338929"


def test_an_account_named_by_its_bank_only_reviews_as_before() -> None:
    """A BIC is no scheme the register holds: no ``payee_account``, the reader's
    ``payee_account_not_iban`` whatever is on file."""
    xml = _bankgiro(scheme=b"RABONL2U")
    assert read_invoice_xml(xml).stated_accounts == (
        AccountFacts("5050-1055", "RABONL2U", read_invoice_xml(xml).stated_accounts[0].path),
    )
    reading = read_einvoice(xml)
    assert reading.extraction.payee_account is None
    assert [r.code for r in reading.reasons] == [ReasonCode.PAYEE_ACCOUNT_NOT_IBAN]
    got = _decide(xml, "SE:BANKGIRO:50501055")
    assert got.report.decision is Decision.REVIEW_REQUIRED
    assert _codes(got) == ["payee_account_not_iban"]


# --- validation ---------------------------------------------------------------------------


def test_the_account_on_file_is_accepted_as_an_iban_on_file_is() -> None:
    got = _decide(_bankgiro(), "SE:BANKGIRO:5050 1055")
    assert (got.report.decision, _codes(got)) == (Decision.SUCCEEDED, [])
    assert got.report.proofs == ()  # it states an account: no "states none" proof
    assert got.extraction.payee_account is not None


def test_an_account_not_on_file_goes_to_review() -> None:
    for on_file in ((), ("SE:BANKGIRO:50501056",), ("SE:PLUSGIRO:50501055",)):
        got = _decide(_bankgiro(), *on_file)
        assert got.report.decision is Decision.REVIEW_REQUIRED, on_file
        assert _codes(got) == ["payee_account_not_registered"], on_file
        assert "missing_field" not in _codes(got)


def test_a_supplier_not_on_file_accepts_no_account() -> None:
    xml = _bankgiro()
    facts = read_invoice_xml(xml)
    assert facts.issue_date is not None
    other = SupplierRecord(
        "Someone Else AB", "SE999999999901", accounts=frozenset({"SE:BANKGIRO:50501055"})
    )
    got = interpret_einvoice(
        xml,
        TenantMasterData((other,), frozenset({facts.currency or "EUR"})),
        schema_version=3,
        today=facts.issue_date + timedelta(days=1),
    )
    assert "payee_account_not_registered" in _codes(got)


def test_a_model_may_not_write_a_payee_account() -> None:
    answer = read_einvoice(_bankgiro()).extraction.model_dump_json()
    with pytest.raises(MalformedOutput, match="payee_account"):
        parse_extraction(answer)
    assert "payee_account" not in json.dumps(extraction_json_schema())  # nor offered
    assert Extraction.model_validate_json(answer).payee_account is not None


def test_a_v1_job_cannot_leave_the_account_out() -> None:
    xml = _bankgiro()
    facts = read_invoice_xml(xml)
    assert facts.seller_name is not None and facts.issue_date is not None
    seller = SupplierRecord(
        facts.seller_name, facts.seller_vat_id, accounts=frozenset({"SE:BANKGIRO:50501055"})
    )
    got = interpret_einvoice(
        xml,
        TenantMasterData((seller,), frozenset({facts.currency or "EUR"})),
        schema_version=SCHEMA_V1,
        today=facts.issue_date + timedelta(days=1),
    )
    assert got.report.decision is Decision.REVIEW_REQUIRED
    assert "contract_v3_required" in _codes(got)


def _two_accounts(first: bytes, second: bytes) -> bytes:
    """The invoice offering two accounts to pay, as Peppol's Swedish examples do (a
    bankgiro and a plusgiro): ``first`` and ``second`` each ``SCHEME|ID``."""
    xml = _bankgiro()
    start, end = xml.index(b"<cac:PaymentMeans>"), xml.index(b"</cac:PaymentMeans>") + 19
    block = xml[start:end]

    def means(account: bytes) -> bytes:
        scheme, ident = account.split(b"|")
        return block.replace(b"5050-1055", ident).replace(b"SE:BANKGIRO", scheme)

    return xml[:start] + means(first) + means(second) + xml[end:]


def test_of_two_accounts_the_first_is_paid_and_must_be_on_file() -> None:
    """As the result's IBAN is the first the XML states, its national account is the
    first: the ERP is told to pay that one, so that one must be on file."""
    xml = _two_accounts(b"SE:BANKGIRO|5050-1055", b"SE:PLUSGIRO|333 89 29")
    got = _decide(xml, "SE:BANKGIRO:50501055")
    assert (got.report.decision, _codes(got)) == (Decision.SUCCEEDED, [])
    assert got.extraction.payee_account is not None
    assert got.extraction.payee_account.canonical == "SE:BANKGIRO:50501055"
    assert _codes(_decide(xml, "SE:PLUSGIRO:3338929")) == ["payee_account_not_registered"]
    # a first account the register cannot hold (a BIC names it) reviews as before
    bic_first = _two_accounts(b"BANKSBIC|1234567", b"SE:BANKGIRO|5050-1055")
    got = _decide(bic_first, "SE:BANKGIRO:50501055")
    assert got.extraction.payee_account is None
    assert _codes(got) == ["payee_account_not_iban"]


def test_explain_shows_the_account_as_the_register_holds_it() -> None:
    result = read_einvoice(_bankgiro()).extraction.model_dump(mode="json")
    shown = {name: value for name, value, _ in evidenced_fields(result)}
    assert shown["payee_account"] == "SE:BANKGIRO:50501055"
    marked = {**result, "payee_account": {"value": "[shredded]", "evidence": None}}
    shown = {name: value for name, value, _ in evidenced_fields(marked)}
    assert shown["payee_account"] == "[shredded]"


def test_a_cii_account_is_named_by_its_schemeid_or_reviews_as_before() -> None:
    """CII's ``ProprietaryID`` names its scheme by a ``schemeID`` where at all: with one
    the result holds it; without, scheme None, the reader's ``payee_account_not_iban``."""
    xml = without_cvd((DATA / "currencies" / "02.01a-cvd_INVOICE_uncefact.xml").read_bytes())
    national = _CII_IBAN.sub(rb"\1<ram:ProprietaryID>12345678</ram:ProprietaryID>", xml)
    facts = read_invoice_xml(national)
    assert [(a.id, a.scheme) for a in facts.stated_accounts] == [("12345678", None)] * 2
    assert facts.stated_accounts[0].path.endswith("ram:ProprietaryID")
    reading = read_einvoice(national)
    assert reading.extraction.payee_account is None
    assert [r.code for r in reading.reasons] == [ReasonCode.PAYEE_ACCOUNT_NOT_IBAN]
    named = national.replace(b"<ram:ProprietaryID>", b'<ram:ProprietaryID schemeID="SE:BANKGIRO">')
    reading = read_einvoice(named)
    assert reading.reasons == ()
    assert reading.extraction.payee_account is not None
    assert reading.extraction.payee_account.canonical == "SE:BANKGIRO:12345678"


def test_a_credit_note_holds_no_account_to_pay() -> None:
    """A credit note's account is no payee of the buyer's: no ``payee_account`` (the
    delivery says ``none``), exempt as from the IBAN, whatever is on file."""
    xml = _bankgiro().replace(
        b"<cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>",
        b"<cbc:InvoiceTypeCode>381</cbc:InvoiceTypeCode>",
    )
    assert b"<cbc:InvoiceTypeCode>381" in xml
    reading = read_einvoice(xml)
    assert reading.extraction.document_type == "credit_note"
    assert reading.extraction.payee_account is None
    assert ReasonCode.PAYEE_ACCOUNT_NOT_IBAN not in [r.code for r in reading.reasons]
