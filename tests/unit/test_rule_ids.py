"""Every rule id the code names is registered, and every registered id is used.

The ids are collected from the source's syntax tree (every string constant that has a
registered group's prefix), so an id written in a table, a conditional or a keyword
counts alike; and every ``Reason(...)`` and every grounding refusal names its rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.invoice import RULES, Reason, ReasonCode

ROOT = Path(__file__).resolve().parents[2] / "pipeline"
GROUPS = tuple(sorted({rule.split(".")[0] + "." for rule in RULES}))
#: Calls that make a review reason (grounding's refusals: in extraction only); each must
#: pass ``rule=``.
REFUSALS = {"Reason"}
GROUNDING_REFUSALS = {"refuse", "_refuse"}


def _trees() -> list[tuple[Path, ast.Module]]:
    return [
        (path, ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(ROOT.rglob("*.py"))
        if path.name != "rules.py"
    ]


def _used() -> set[str]:
    return {
        node.value
        for _, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(GROUPS)
        and " " not in node.value
        # a group's prefix ("roles.", "items."), as corrections sort reasons by, is no id
        and not node.value.endswith(".")
    }


def test_every_used_id_is_registered() -> None:
    assert sorted(_used() - set(RULES)) == []


def test_every_registered_id_is_used() -> None:
    assert sorted(set(RULES) - _used()) == []


def test_every_reason_names_its_rule() -> None:
    missing = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            refusal = name in REFUSALS or (
                name in GROUNDING_REFUSALS and path.parent.name == "extraction"
            )
            if refusal and not any(k.arg == "rule" for k in node.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


def test_ids_are_dotted_and_described() -> None:
    for rule, description in RULES.items():
        assert rule == rule.lower() and "." in rule and " " not in rule
        assert description.strip()


def test_reason_stores_its_rule_only_when_set() -> None:
    old = Reason(ReasonCode.MISSING_FIELD, "iban", "null")
    assert "rule" not in old.as_dict()
    new = Reason(ReasonCode.MISSING_FIELD, "iban", "null", rule="validation.missing_field")
    assert new.as_dict()["rule"] == "validation.missing_field"
    with pytest.raises(ValueError, match="unregistered"):
        Reason(ReasonCode.MISSING_FIELD, "iban", "null", rule="no.such_rule")
