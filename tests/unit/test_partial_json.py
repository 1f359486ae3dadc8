"""Scoring what a truncated answer had written: prefix closing and field salvage."""

from __future__ import annotations

import json

import pytest

from benchmarks.eval.partial_json import parse_prefix, salvage
from benchmarks.invoices.generator import Variant, generate_invoice
from pipeline.invoice import Extraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "b": [1, 2, 3', {"a": 1, "b": [1, 2]}),
        ('{"a": "x, y", "b": "unfinished', {"a": "x, y"}),
        ('{"a": {"b": [ {"c": 1}, {"c": 2', {"a": {"b": [{"c": 1}]}}),
        ('{"a": "quote \\" and , inside", "b": 2}', {"a": 'quote " and , inside', "b": 2}),
        ('{"a": 1}', {"a": 1}),
        ('{"a', None),
        ("not json at all", None),
    ],
)
def test_parse_prefix_keeps_the_longest_complete_prefix(text: str, expected: object) -> None:
    assert parse_prefix(text) == expected


def test_salvage_keeps_what_validates_and_grows_with_the_prefix() -> None:
    full = generate_invoice(3, Variant.CLEAN, max_line_items=4).truth.model_dump_json()
    whole = salvage(Extraction, json.loads(full))
    assert whole is not None and whole == Extraction.model_validate_json(full)
    seen = []
    for cut in range(200, len(full), 150):
        partial = salvage(Extraction, parse_prefix(full[:cut]))
        assert partial is not None
        seen.append(len(partial.line_items))
        # Nothing salvaged is invented: every kept line item is one of the truth's.
        assert set(partial.line_items) <= set(whole.line_items)
    assert seen == sorted(seen) and seen[-1] > 0


def test_salvage_of_nothing_is_an_empty_extraction_not_a_crash() -> None:
    empty = salvage(Extraction, None)
    assert empty is not None and empty.invoice_number is None and empty.line_items == ()
