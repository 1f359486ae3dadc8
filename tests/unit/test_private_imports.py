"""No module imports another module's private names.

A leading underscore says "this module's business": ``from x import _name`` across
modules couples the importer to what the owner may change at will (the driver
fleet once imported the supervisor's ``_kill`` and so closed an import circle).
``import-linter`` contracts speak of modules, not names, so this walk checks
``pipeline/``, ``cluster/``, ``deployments/`` and ``benchmarks/`` for imports of
a private name or a private module of the project, absolute or relative.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "cluster", "deployments", "benchmarks")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, with relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """``line: what`` for each import of a private name or module of the project."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(module, is_package, node)
            if target.split(".")[0] not in PACKAGES:
                continue  # a third party's private name is not this walk's business
            if any(_private(part) for part in target.split(".")):
                found.append(f"{node.lineno}: from {target} import ...")
            found += [
                f"{node.lineno}: from {target} import {alias.name}"
                for alias in node.names
                if _private(alias.name)
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in PACKAGES
                and any(_private(part) for part in alias.name.split("."))
            ]
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    wrong = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            found = private_imports(path.read_text(), module, is_package=is_package)
            wrong += [f"{path.relative_to(ROOT)}:{line}" for line in found]
    assert wrong == []


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("from cluster.supervisor import _kill", "cluster.driver_fleet"),
        ("def later():\n    from cluster.supervisor import _kill", "cluster.driver_fleet"),
        ("from .policy import _EPSILON", "pipeline.admission.ledger"),
        ("from pipeline.jobs import _rows", "pipeline.worker.attempt"),
        ("import benchmarks.chaos._timeline", "benchmarks.report"),
    ],
)
def test_a_private_import_is_found(source: str, module: str) -> None:
    assert private_imports(source, module) != []


@pytest.mark.parametrize(
    "source",
    [
        "from cluster.actor_kill import kill_actor",
        "from pgserver import _commands",  # a third party's, not the project's
        "from pipeline import __version__",
    ],
)
def test_public_and_foreign_names_pass(source: str) -> None:
    assert private_imports(source, "cluster.driver_fleet") == []
