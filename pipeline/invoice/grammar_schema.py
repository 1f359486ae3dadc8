"""The extraction contract as a self-contained JSON schema for guided decoding.

:func:`extraction_json_schema` exports :class:`~pipeline.invoice.contract.Extraction`
for vLLM structured output (``response_format`` json_schema / guided decoding): no
``$ref``, no string formats, no numeric bounds, only ``type``/``properties``/
``required``/``items``/``anyOf``/``pattern``/``additionalProperties`` so xgrammar and
the other backends all accept it. What only the system writes is left out: the evidence
keys grounding derives, and contract v3's fields (allowances and charges, the
supplier's tax number), which only an e-invoice reader fills; a model's grammar never
offers them.
"""

from __future__ import annotations

import copy
from typing import Any

from pipeline.invoice.contract import V3_FIELDS, V3_NULLABLE_RATES, Extraction
from pipeline.invoice.evidence import SYSTEM_EVIDENCE_KEYS

_SCHEMA_NOISE = ("title", "description", "default")


def extraction_json_schema() -> dict[str, Any]:
    """Return the self-contained JSON schema of :class:`Extraction`.

    ``$ref``/``$defs`` are inlined (the contract has no recursion) and titles,
    descriptions and defaults dropped: the grammar backend needs none of them,
    and the prompt explains the semantics. The result is a fresh dict each call,
    safe to mutate.
    """
    raw = Extraction.model_json_schema(mode="validation")
    defs: dict[str, Any] = raw.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            merged = {**copy.deepcopy(defs[name]), **{k: v for k, v in node.items() if k != "$ref"}}
            return resolve(merged)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SCHEMA_NOISE:
                continue
            if key == "properties":
                out[key] = {name: resolve(sub) for name, sub in value.items()}
            else:
                out[key] = resolve(value)
        return out

    schema: dict[str, Any] = resolve(raw)
    _drop_system_keys(schema)
    _drop_v3_fields(schema)
    return schema


def _drop_v3_fields(schema: dict[str, Any]) -> None:
    """Remove contract v3's fields: the model path holds what contract v2 holds. A rate
    only contract v3 may leave out (category O) is offered without its null."""
    for rows, name in V3_NULLABLE_RATES:
        node = _node(schema, [rows])
        options = node["properties"][name].get("anyOf", [])
        (rate,) = [option for option in options if option.get("type") != "null"]
        node["properties"][name] = rate
    for dotted in V3_FIELDS:
        *parents, name = dotted.split(".")
        node = _node(schema, parents)
        node["properties"].pop(name, None)
        if name in node.get("required", []):
            node["required"] = [r for r in node["required"] if r != name]


def _node(schema: dict[str, Any], parents: list[str]) -> dict[str, Any]:
    """The object schema at ``parents`` (a list's rows: ``line_items``)."""
    node = schema
    for parent in parents:
        node = node["properties"][parent]
        node = node.get("items", node)
    return node


def _drop_system_keys(node: Any) -> None:
    """Remove the evidence keys only grounding writes (v1 models never see them)."""
    if isinstance(node, list):
        for item in node:
            _drop_system_keys(item)
    elif isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and {"page", "start", "end", "quote"} <= props.keys():
            for key in SYSTEM_EVIDENCE_KEYS:
                props.pop(key, None)
        for value in node.values():
            _drop_system_keys(value)
