"""The version rule's reading of a result: document type, issue date, amendment marker,
and the keyed version key (pipeline/jobs/versions.py)."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

import pytest

from pipeline.identity import invoice_identity
from pipeline.jobs.versions import amendment_marker, document_type, issue_date, version_key


def result(**extra: Any) -> dict[str, Any]:
    return {
        "supplier": {"vat_id": {"value": "DE123456789"}},
        "invoice_number": {"value": "INV-1"},
        "gross_total": {"value": "10.00"},
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "marker"),
    [
        ({}, None),
        ({"document_title": {"value": "Invoice"}}, None),
        ({"document_title": {"value": "Rechnung"}}, None),
        ({"document_title": {"value": "Corrected invoice"}}, "title:corrected"),
        ({"document_title": "RECHNUNGSKORREKTUR"}, "title:rechnungskorrektur"),
        ({"document_title": {"value": "Korrektur der Rechnung 17"}}, "title:korrektur"),
        ({"document_title": {"value": "Berichtigte Rechnung"}}, "title:berichtigte"),
        ({"document_title": {"value": "Facture rectificative"}}, "title:rectificative"),
        ({"preceding_invoice": {"value": "INV-0"}}, "preceding_invoice"),
        ({"preceding_invoice": {"value": ""}}, None),
    ],
)
def test_amendment_markers(extra: dict[str, Any], marker: str | None) -> None:
    assert amendment_marker(result(**extra)) == marker


def test_document_type_defaults_to_invoice() -> None:
    assert document_type(result()) == "invoice"
    assert document_type(result(document_type={"value": "credit_note"})) == "credit_note"
    assert document_type(result(document_type="not a type!")) == "invoice"


def test_issue_date_is_iso_or_none() -> None:
    assert issue_date(result(issue_date={"value": "2026-11-02"})) == date(2026, 11, 2)
    assert issue_date(result(issue_date={"value": "02.11.2026"})) is None
    assert issue_date(result()) is None


def test_the_version_key_ignores_the_total_and_keys_tenant_and_type() -> None:
    secret, tenant = b"k" * 32, uuid.uuid4()
    one = invoice_identity(result())
    other_total = invoice_identity(result(gross_total={"value": "99.00"}))
    assert one is not None and other_total is not None
    key = version_key(secret, tenant, one, "invoice")
    assert key == version_key(secret, tenant, other_total, "invoice")
    assert key != version_key(secret, uuid.uuid4(), one, "invoice")
    assert key != version_key(secret, tenant, one, "credit_note")
    assert key != version_key(b"j" * 32, tenant, one, "invoice")
    assert b"INV-1" not in key and len(key) == 32
