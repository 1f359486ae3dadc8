"""The answers the fuzzer feeds the pipeline: the perfect one, and decoys.

``perfect`` is :func:`~pipeline.extraction.extractor.answer_for` of the truth: every value
as printed, every row cited on its line. A ``decoy`` answer is the perfect one with a
single field replaced by another value this document's grammar
(``prepare_call(text).json_schema``) offers for it, as a small model that picks the wrong
candidate would write (and ``null`` for the due date): what validation must catch, since
the grammar lets a model write it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from benchmarks.fuzz.cases import FuzzCase
from pipeline.extraction import prepare_call
from pipeline.extraction.extractor import answer_for

MODES = ("perfect", "decoy")
#: Answer keys whose grammar is a list of printed candidates.
DECOY_FIELDS = (
    "supplier", "vat_id", "number", "issue_date", "due_date", "currency", "iban", "net", "tax",
    "gross",
)  # fmt: skip
ITEM_DESCRIPTION = "items.description"


@dataclass(frozen=True)
class Decoy:
    """One wrong candidate: the answer key it replaces, the value written, the answer."""

    field: str
    value: Any
    answer: str


def perfect(case: FuzzCase) -> str:
    return answer_for(case.truth, case.text)


def _enum(node: dict[str, Any]) -> list[Any]:
    """The candidates a schema node offers (an ``enum``, possibly inside ``anyOf``)."""
    if "enum" in node:
        return list(node["enum"])
    for option in node.get("anyOf", ()):
        if "enum" in option:
            return list(option["enum"])
    return []


def decoys(case: FuzzCase, k: int = 3) -> list[Decoy]:
    """Up to ``k`` wrong candidates per field, drawn per invoice and family, one field
    changed per answer. Item descriptions: another cell of the same row, where the
    grammar offers a row several."""
    rng = random.Random(f"decoy:{case.seed}:{case.name}")
    right = json.loads(perfect(case))
    properties = prepare_call(case.text).json_schema["properties"]
    out: list[Decoy] = []

    def emit(field: str, key: str, value: Any) -> None:
        out.append(Decoy(field, value, json.dumps({**right, key: value}, ensure_ascii=False,
                                                  separators=(",", ":"))))  # fmt: skip

    for key in DECOY_FIELDS:
        others = [v for v in _enum(properties.get(key, {})) if v != right.get(key)]
        rng.shuffle(others)
        if key == "due_date" and right.get(key) is not None:
            others.insert(0, None)
        for value in others[:k]:
            emit(key, key, value)
    items = properties.get("items", {})
    given = right.get("items")
    if given and "prefixItems" in items and len(items["prefixItems"]) == len(given):
        swaps = []
        for pos, node in enumerate(items["prefixItems"]):
            cells = node["prefixItems"][1].get("enum", [])
            swaps += [(pos, c) for c in cells if c != given[pos][1]]
        rng.shuffle(swaps)
        for pos, cell in swaps[:k]:
            changed = [list(ref) for ref in given]
            changed[pos][1] = cell
            emit(ITEM_DESCRIPTION, "items", changed)
    return out
