"""The benchmarks' walls are enforced: a wrong import in ``benchmarks/`` breaks a contract.

The ``benchmarks`` contracts of ``pyproject.toml`` run on a copy of ``benchmarks/``
alone (``pipeline`` is then an outside package), first as it is, then with one import
planted against the direction; and no module takes another's private name.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_import_contracts import ROOT, _lint, _only_config

PROJECT_PACKAGES = {"benchmarks", "pipeline", "cluster", "deployments"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("benchmarks-contracts")
    shutil.copytree(
        ROOT / "benchmarks", root / "benchmarks", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "pyproject.toml").write_text(_only_config("benchmarks"))
    return root


def test_the_copy_keeps_every_benchmarks_contract(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "benchmarks layers" in result.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "broken"),
    [
        # what every benchmark shares reaching up into a kind of benchmark
        ("benchmarks.scenario", "import benchmarks.load.runner", "benchmarks layers"),
        # a kind of benchmark importing the commands on top
        ("benchmarks.eval.scoring", "import benchmarks.cli", "benchmarks layers"),
        # the generator reaching up into the scenario run
        ("benchmarks.load.generator", "import benchmarks.load.suite", "benchmarks.load layers"),
        # the dataset reaching up into scoring
        ("benchmarks.eval.dataset", "import benchmarks.eval.scoring", "benchmarks.eval layers"),
    ],
)
def test_a_wrong_import_breaks_a_benchmarks_contract(
    tree: Path, module: str, wrong_import: str, broken: str
) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    original = path.read_text()
    path.write_text(original + f"\n{wrong_import}\n")
    try:
        result = _lint(tree)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    assert "Broken contracts" in result.stdout, result.stdout
    assert broken in result.stdout.split("Broken contracts", 1)[1], result.stdout


def test_no_benchmarks_module_imports_another_modules_private_name() -> None:
    """``from benchmarks.x import _name`` reaches past a module's surface; none may."""
    wrong = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in PROJECT_PACKAGES:
                continue
            private = [
                a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
            ]
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{n}" for n in private]
    assert wrong == []


_FIND_CYCLES = """
import json, grimp
graph = grimp.build_graph("benchmarks", cache_dir=None)
on_a_cycle = {
    tuple(sorted((module, imported)))
    for module in graph.modules
    for imported in graph.find_modules_directly_imported_by(module)
    if graph.find_shortest_chain(importer=imported, imported=module)
}
print(json.dumps(sorted(on_a_cycle)))
"""


def test_benchmarks_has_no_import_cycle() -> None:
    """No two modules of ``benchmarks`` import each other, directly or through others,
    function-level (lazy) imports included."""
    result = subprocess.run(
        [sys.executable, "-c", _FIND_CYCLES],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert json.loads(result.stdout) == []


#: The review console is an edge of the API: the app installs its pages, the context
#: holds its session signer and views; nothing else reaches into it.
CONSOLE_IMPORTERS = {"pipeline.api.app", "pipeline.api.context"}


def test_only_the_app_and_the_context_import_the_console() -> None:
    wrong = []
    for package in sorted(PROJECT_PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if module.startswith("pipeline.api.console") or module in CONSOLE_IMPORTERS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                targets = []
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                if any(t.startswith("pipeline.api.console") for t in targets):
                    wrong.append(f"{module}:{node.lineno}")
    assert wrong == []
