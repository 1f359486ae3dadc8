"""The extraction contract: parsing, Decimal-as-string money, and the guided-decoding schema."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import jsonschema
import pytest

from benchmarks.invoices.generator import generate_invoice
from pipeline.errors import MalformedOutput, RetryableError
from pipeline.invoice import (
    EXTRACTION_SCHEMA_VERSION,
    Extraction,
    extraction_json_schema,
    parse_extraction,
)
from pipeline.invoice.contract import MAX_OUTPUT_CHARS


@pytest.fixture(scope="module")
def truth() -> Extraction:
    return generate_invoice(4, line_items=3).truth


def _json(extraction: Extraction) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(extraction.model_dump_json())
    return data


def _walk(node: Any) -> list[Any]:
    out = [node]
    if isinstance(node, dict):
        for value in node.values():
            out += _walk(value)
    elif isinstance(node, list):
        for value in node:
            out += _walk(value)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_ground_truth_round_trips_through_json(seed: int) -> None:
    truth = generate_invoice(seed).truth
    assert parse_extraction(truth.model_dump_json()) == truth


def test_money_is_serialised_as_strings_never_floats(truth: Extraction) -> None:
    data = _json(truth)
    assert not [v for v in _walk(data) if isinstance(v, float)]
    assert isinstance(data["net_total"]["value"], str)
    assert isinstance(data["line_items"][0]["quantity"], str)
    assert Decimal(data["gross_total"]["value"]) == truth.gross_total.value  # type: ignore[union-attr]
    assert re.fullmatch(r"-?\d+\.\d{2}", data["gross_total"]["value"])


def test_python_side_values_are_decimals(truth: Extraction) -> None:
    assert isinstance(truth.line_items[0].unit_price, Decimal)
    assert isinstance(truth.tax_lines[0].rate, Decimal)


def _mutate(data: dict[str, Any], path: str, value: Any) -> str:
    node: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return json.dumps(data)


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        ("net_total.value", 1234.5, "amount as a JSON number"),
        ("net_total.value", "1.234,50", "decimal comma"),
        ("net_total.value", "1,234.50", "thousands separator"),
        ("net_total.value", "1E+3", "exponent"),
        ("net_total.value", "NaN", "not a number"),
        ("line_items.0.quantity", 2, "quantity as a JSON number"),
        ("line_items.0.tax_rate", "19%", "percent sign"),
        ("line_items.0.tax_rate", "100", "rate out of range"),
        ("issue_date.value", "03.02.2024", "non-ISO date"),
        ("issue_date.value", "2024-02-30", "impossible date"),
        ("currency.value", "eur", "lower-case currency"),
        ("currency.value", "€", "currency symbol"),
        ("iban.value", "DE89 3704 0044 0532 0130 00", "IBAN with spaces"),
        ("net_total.evidence.page", 0, "page 0"),
        ("net_total.evidence.start", -1, "negative offset"),
        ("net_total.evidence.start", "3", "offset as a string"),
        ("net_total.evidence.end", 3.0, "offset as a float"),
        ("invoice_number.value", "   ", "blank text (null is how to say missing)"),
        ("net_total.surprise", "x", "unknown key"),
        ("gross_total", _DELETE, "required key absent"),
        ("uncertain_fields", _DELETE, "required list absent"),
        ("line_items", None, "line_items null"),
    ],
)
def test_schema_violations_are_malformed_output(
    truth: Extraction, path: str, value: Any, why: str
) -> None:
    text = _mutate(_json(truth), path, value)
    with pytest.raises(MalformedOutput, match="schema-invalid"):
        parse_extraction(text)


@pytest.mark.parametrize("text", ["", "{", "not json", '{"supplier": }', "[1, 2", "null"])
def test_bad_json_is_malformed_output(text: str) -> None:
    with pytest.raises(MalformedOutput):
        parse_extraction(text)


def test_malformed_output_is_retryable() -> None:
    with pytest.raises(RetryableError) as info:
        parse_extraction("{")
    assert info.value.error_class == "malformed_output"


def test_nullable_fields_accept_null(truth: Extraction) -> None:
    data = _json(truth)
    for key in ("net_total", "iban", "due_date", "currency"):
        data[key] = None
    data["supplier"]["vat_id"] = None
    parsed = parse_extraction(json.dumps(data))
    assert parsed.net_total is None and parsed.iban is None and parsed.supplier.vat_id is None


def test_one_markdown_fence_is_tolerated(truth: Extraction) -> None:
    assert parse_extraction(f"```json\n{truth.model_dump_json()}\n```") == truth
    with pytest.raises(MalformedOutput):
        parse_extraction(f"Here you go: {truth.model_dump_json()}")


def test_oversized_output_is_rejected_before_parsing() -> None:
    with pytest.raises(MalformedOutput, match="characters"):
        parse_extraction(" " * (MAX_OUTPUT_CHARS + 1))


def test_extractions_are_immutable(truth: Extraction) -> None:
    with pytest.raises(ValueError):
        truth.invoice_number = None  # type: ignore[misc]


# --- the JSON schema handed to guided decoding ------------------------------------------

_ALLOWED_KEYWORDS = {
    "type",
    "properties",
    "required",
    "items",
    "anyOf",
    "pattern",
    "additionalProperties",
}


def _schema_nodes(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out.append(node)
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    out += _schema_nodes(sub)
            elif isinstance(value, dict | list):
                out += _schema_nodes(value)
    elif isinstance(node, list):
        for value in node:
            out += _schema_nodes(value)
    return out


def test_schema_is_self_contained_and_uses_only_simple_keywords() -> None:
    schema = extraction_json_schema()
    nodes = _schema_nodes(schema)
    used = {key for node in nodes for key in node}
    assert used <= _ALLOWED_KEYWORDS, used - _ALLOWED_KEYWORDS
    assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema)


def test_every_object_is_closed_and_requires_all_its_properties() -> None:
    objects = [n for n in _schema_nodes(extraction_json_schema()) if n.get("type") == "object"]
    assert len(objects) > 10
    for node in objects:
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])


def test_money_fields_are_pattern_constrained_strings() -> None:
    schema = extraction_json_schema()
    item = schema["properties"]["line_items"]["items"]["properties"]
    for name in ("quantity", "unit_price", "line_amount", "tax_rate"):
        assert item[name]["type"] == "string"
        pattern = re.compile(item[name]["pattern"])
        assert pattern.fullmatch("19") and not pattern.fullmatch("19,5")
    net = schema["properties"]["net_total"]["anyOf"][0]["properties"]["value"]
    assert net["type"] == "string" and not re.fullmatch(net["pattern"], "1e3")


def test_schema_accepts_the_ground_truth_and_rejects_float_money(truth: Extraction) -> None:
    schema = extraction_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    for seed in range(5):
        validator.validate(_json(generate_invoice(seed).truth))
    data = _json(truth)
    data["net_total"]["value"] = 12.5
    assert not validator.is_valid(data)


def test_schema_is_a_fresh_copy_each_call() -> None:
    first = extraction_json_schema()
    first["properties"].clear()
    assert extraction_json_schema()["properties"]


def test_schema_version_is_named() -> None:
    assert EXTRACTION_SCHEMA_VERSION.startswith("fenceline.extraction/")
