"""A malformed answer's error detail (an attempt's ``error_detail``, stored as it is)
names what is wrong, never the IBAN it refused (docs/data-lifecycle.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks.invoices.generator import generate_invoice
from pipeline.errors import MalformedOutput
from pipeline.invoice import parse_extraction


def test_a_refused_iban_is_not_repeated_in_the_error() -> None:
    answer = json.loads(generate_invoice(5).truth.model_dump_json())
    printed = "DE89 3704 0044 0532 0130 00"
    answer["iban"] = {"value": printed, "evidence": answer["iban"]["evidence"]}
    with pytest.raises(MalformedOutput, match="IBAN must match") as caught:
        parse_extraction(json.dumps(answer))
    assert "3704" not in str(caught.value)
    assert f"got {len(printed)} characters" in str(caught.value)
