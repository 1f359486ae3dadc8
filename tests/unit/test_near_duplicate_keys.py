"""The number normalisation and keys behind possible duplicates (issue 47, item 5)."""

from __future__ import annotations

import uuid

import pytest

from pipeline.jobs.near_duplicates import near_keys, normalise_number


@pytest.mark.parametrize(
    ("printed", "normalised"),
    [
        ("INV-0042", "42"),
        ("inv 0042", "42"),
        ("Nr. 42", "42"),
        ("RE-00042", "42"),
        ("RE42", "42"),
        ("Rechnung Nr. 42", "42"),
        ("Invoice No. 0042", "42"),
        ("INV/00/42", "42"),
        ("2026 / 0042", "20260042"),
        ("A-0042", "A0042"),  # a letter that is no prefix word is part of the number
        ("REF42", "REF42"),
        ("INV", "INV"),  # nothing but a prefix word: kept
        ("000", "0"),
    ],
)
def test_a_number_loses_its_formatting_only(printed: str, normalised: str) -> None:
    assert normalise_number(printed) == normalised


def test_keys_are_keyed_by_the_secret_and_the_tenant() -> None:
    result = {
        "supplier": {"vat_id": {"value": "DE123456789"}},
        "invoice_number": {"value": "INV-1"},
        "gross_total": {"value": "10.00"},
        "issue_date": {"value": "2026-11-02"},
    }
    tenant = uuid.uuid4()
    keys = near_keys(b"s" * 32, tenant, result)
    assert [k.kind for k in keys] == ["number", "formatted"]
    assert near_keys(b"t" * 32, tenant, result) != keys
    assert near_keys(b"s" * 32, uuid.uuid4(), result) != keys
    assert [k.kind for k in near_keys(b"s" * 32, tenant, {**result, "issue_date": None})] == [
        "number"
    ]
