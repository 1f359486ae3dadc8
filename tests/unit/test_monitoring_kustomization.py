"""The alert rules and the dashboard ship with ``kubectl apply -k``.

Every kustomization under ``kuberay/`` names only files and directories that
exist; ``kuberay/monitoring`` is a kustomization of its own holding the
PrometheusRule and the dashboard ConfigMap, and ``kuberay/base`` (so every
overlay) includes it. Rendered both with the in-repo renderer and with
``kubectl kustomize``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberay.kustomize import render
from kuberay.monitoring.dashboard import (
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    CONFIGMAP_OUT,
    configmap_text,
    dashboard,
)
from kuberay.validation import validate_documents

KUBERAY = Path(__file__).resolve().parents[2] / "kuberay"
SHIPPING = (
    "monitoring",
    "base",
    "overlays/dev",
    "overlays/gpu",
    "overlays/gpu-ha",
    "overlays/provider",
)


def referenced(kfile: Path) -> list[str]:
    spec = yaml.safe_load(kfile.read_text())
    paths = list(spec.get("resources", [])) + list(spec.get("components", []))
    paths += [p["path"] for p in spec.get("patches", []) if "path" in p]
    return paths


@pytest.mark.parametrize(
    "kfile", sorted(KUBERAY.rglob("kustomization.yaml")), ids=lambda p: str(p.parent.name)
)
def test_every_kustomization_lists_files_that_exist(kfile: Path) -> None:
    names = referenced(kfile)
    assert names, kfile
    for name in names:
        target = (kfile.parent / name).resolve()
        assert target.exists(), f"{kfile}: {name} does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").is_file(), f"{kfile}: {name} is no kustomization"


def test_the_check_catches_a_missing_file(tmp_path: Path) -> None:
    kfile = tmp_path / "kustomization.yaml"
    kfile.write_text(yaml.safe_dump({"resources": ["prometheusrule.yaml"]}))
    with pytest.raises(AssertionError, match="does not exist"):
        test_every_kustomization_lists_files_that_exist(kfile)


def test_committed_dashboard_configmap_is_the_generated_one() -> None:
    assert CONFIGMAP_OUT.read_text() == configmap_text(), (
        "run python -m kuberay.monitoring.dashboard"
    )


def _by_kind(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("name", SHIPPING)
def test_each_kustomization_ships_the_rules_and_the_dashboard(name: str) -> None:
    docs = render(KUBERAY / name)
    assert validate_documents(docs, source=name) == []
    rule = _by_kind(docs, "PrometheusRule", "fenceline")
    committed = yaml.safe_load((KUBERAY / "monitoring" / "prometheusrule.yaml").read_text())
    assert rule["spec"] == committed["spec"]
    board = _by_kind(docs, "ConfigMap", CONFIGMAP_NAME)
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"][CONFIGMAP_KEY]) == dashboard()
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is part of this machine image; install it"
    out = subprocess.run(
        [kubectl, "kustomize", str(KUBERAY / name)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    theirs = list(yaml.safe_load_all(out))
    assert _by_kind(theirs, "PrometheusRule", "fenceline") == rule
    assert _by_kind(theirs, "ConfigMap", CONFIGMAP_NAME) == board
