"""The dependency direction is enforced, not just written down.

``make lint`` runs ``lint-imports`` with the contracts in ``pyproject.toml``
(``[tool.importlinter]``). These tests show the contracts hold for the tree, that
they *fail* when a module imports against the direction (on a copy of
``pipeline/`` or ``cluster/`` with one wrong import planted), and that neither
has an import cycle, including ones hidden in function-level (lazy) imports.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


#: The keys whose modules say which package a contract is about.
MODULE_KEYS = ("source_modules", "containers", "modules", "ancestors", "protected_modules")


def _only_config(package: str = "pipeline") -> str:
    """The contracts of pyproject.toml on ``package`` alone, for a tree that holds only it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = [
        "[tool.importlinter]",
        f'root_packages = ["{package}"]',
        "include_external_packages = true",
    ]
    for contract in config["contracts"]:
        modules = [m for key in MODULE_KEYS for m in contract.get(key, [])]
        if not modules or not all(m.split(".")[0] == package for m in modules):
            continue
        lines.append("\n[[tool.importlinter.contracts]]")
        for key, value in contract.items():
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "pipeline", tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "pyproject.toml").write_text(_only_config())
    return tmp_path


@pytest.fixture
def cluster_tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "cluster", tmp_path / "cluster", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "pyproject.toml").write_text(_only_config("cluster"))
    return tmp_path


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def _plant(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(
    ("module", "wrong_import", "broken"),
    [
        # the foundation reaching up into a subpackage
        ("pipeline.states", "import pipeline.jobs.store", "foundation"),
        # a service importing the worker, and a sibling it may not use
        ("pipeline.jobs.store", "import pipeline.worker.attempt", "pipeline.jobs imports only"),
        ("pipeline.messaging.outbox", "import pipeline.delivery.signing", "pipeline.messaging"),
        # the invoice model reaching up into a stage that builds it
        ("pipeline.invoice.numbers", "import pipeline.extraction", "pipeline.invoice imports only"),
        # one sibling stage importing the other: the worker composes them
        ("pipeline.extraction.terms", "import pipeline.validation", "independent siblings"),
        # the web framework outside pipeline.api, Ray inside pipeline
        ("pipeline.jobs.quotas", "import fastapi", "fastapi and starlette"),
        ("pipeline.extraction.prompts", "import ray", "Ray-free"),
        # documents over the invoice model, under extraction; its clients stay inside it
        ("pipeline.documents.sniff", "import pipeline.extraction", "pipeline.documents imports"),
        ("pipeline.invoice.numbers", "import pipeline.documents", "pipeline.invoice imports only"),
        ("pipeline.validation.dates", "import pipeline.documents", "pipeline.validation imports"),
        ("pipeline.extraction.prompts", "import pypdfium2", "S3 client and PDFium"),
        ("pipeline.worker.attempt", "import boto3", "S3 client and PDFium"),
        ("pipeline.worker.attempt", "from PIL import Image", "and Pillow, only"),
    ],
)
def test_a_wrong_import_breaks_a_contract(
    tree: Path, module: str, wrong_import: str, broken: str
) -> None:
    assert _lint(tree).returncode == 0  # the copy alone keeps them
    _plant(tree, module, wrong_import)
    result = _lint(tree)
    assert result.returncode != 0
    assert "Broken contracts" in result.stdout, result.stdout
    assert broken in result.stdout.split("Broken contracts", 1)[1], result.stdout


def test_extraction_and_the_worker_may_read_documents(tree: Path) -> None:
    """The allowed direction stays allowed: stages over a layout read ``pipeline.documents``."""
    _plant(tree, "pipeline.extraction.layout", "import pipeline.documents")
    _plant(tree, "pipeline.worker.attempt", "import pipeline.documents")
    result = _lint(tree)
    assert result.returncode == 0, result.stdout


def test_every_root_module_is_named_in_the_foundation_contract() -> None:
    """A new module at ``pipeline/``'s root is foundation only once a contract says so."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (foundation,) = [
        c for c in config["contracts"] if c["name"].startswith("the foundation at pipeline's root")
    ]
    roots = {f"pipeline.{p.stem}" for p in (ROOT / "pipeline").glob("*.py") if p.stem != "__init__"}
    assert roots == set(foundation["source_modules"])


@pytest.mark.parametrize(
    ("module", "wrong_import", "broken"),
    [
        # an actor module reaching up to the supervisor, admission up to the drivers
        ("cluster.drivers", "import cluster.supervisor", "cluster layers"),
        ("cluster.admission.client", "import cluster.drivers", "cluster layers"),
        # the client reaching up to the gates over it
        ("cluster.admission.client", "import cluster.admission.gates", "cluster.admission layers"),
        # past cluster.admission's surface, and into the CLI from below
        ("cluster.supervisor", "import cluster.admission.actor", "surface"),
        ("cluster.runtime", "import cluster.cli.base", "cluster layers"),
    ],
)
def test_a_wrong_import_breaks_a_cluster_contract(
    cluster_tree: Path, module: str, wrong_import: str, broken: str
) -> None:
    assert _lint(cluster_tree).returncode == 0  # the copy alone keeps them
    _plant(cluster_tree, module, wrong_import)
    result = _lint(cluster_tree)
    assert result.returncode != 0
    assert "Broken contracts" in result.stdout, result.stdout
    assert broken in result.stdout.split("Broken contracts", 1)[1], result.stdout


_FIND_CYCLES = """
import json, sys
import grimp

graph = grimp.build_graph(sys.argv[1], cache_dir=None)
index, low, stack, on_stack, found = {}, {}, [], set(), []
sys.setrecursionlimit(10_000)


def visit(module):  # Tarjan's strongly connected components
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for imported in graph.find_modules_directly_imported_by(module):
        if imported not in index:
            visit(imported)
            low[module] = min(low[module], low[imported])
        elif imported in on_stack:
            low[module] = min(low[module], index[imported])
    if low[module] == index[module]:
        component = []
        while True:
            member = stack.pop()
            on_stack.discard(member)
            component.append(member)
            if member == module:
                break
        if len(component) > 1:
            found.append(sorted(component))


for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps(found))
"""


def _cycles(tree: Path, package: str = "pipeline") -> list[list[str]]:
    """Import cycles in ``package`` (function-level imports included), in a fresh
    interpreter so that the tree analysed is ``tree``'s, not an imported one."""
    result = subprocess.run(
        [sys.executable, "-c", _FIND_CYCLES, package],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    cycles: list[list[str]] = json.loads(result.stdout)
    return cycles


def test_pipeline_has_no_import_cycle() -> None:
    assert _cycles(ROOT) == []


@pytest.mark.parametrize("package", ["cluster", "deployments", "benchmarks"])
def test_the_other_packages_have_no_import_cycle(package: str) -> None:
    assert _cycles(ROOT, package) == []


def test_a_lazy_import_cycle_is_found(tree: Path) -> None:
    assert _cycles(tree) == []
    # The kind of cycle a function-level import hides from a plain ``import pipeline``.
    _plant(tree, "pipeline.jobs.records", "def _later() -> None:\n    import pipeline.jobs.store")
    pair = {"pipeline.jobs.records", "pipeline.jobs.store"}
    assert any(pair <= set(cycle) for cycle in _cycles(tree))


SUBPACKAGES = {p.parent.name for p in (ROOT / "pipeline").glob("*/__init__.py")}
#: Imports of a sibling's module allowed for now (none: the CLIs moved to cluster/cli/).
PENDING: set[tuple[str, str]] = set()


def test_siblings_import_each_others_surface_only() -> None:
    """``pipeline/a/x.py`` may import ``pipeline.b`` (its ``__init__``), never ``pipeline.b.y``."""
    wrong = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = module.split(".")[1] if module.count(".") >= 2 else None
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                parts = target.split(".")
                if parts[0] != "pipeline" or len(parts) < 3 or parts[1] not in SUBPACKAGES:
                    continue
                if parts[1] != own and (module, target) not in PENDING:
                    wrong.append(f"{module}:{node.lineno} imports {target}")
    assert wrong == []
