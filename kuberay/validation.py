"""Offline validation of Kubernetes manifests against the committed JSON schemas.

The equivalent of ``kubeconform -strict`` with the KubeRay CRD schemas, in
Python: every document is matched to a schema by ``apiVersion`` and ``kind``
(an unknown pair is an error, never silently accepted) and validated with
``jsonschema`` (draft 2020-12). The schemas are closed (unknown fields are
errors), which is what ``kubectl apply``'s default server-side field validation
does on a real API server, so a misspelt field fails here instead of there.

Patch files are partial documents: :func:`validate_document` with
``partial=True`` drops every ``required`` keyword (and ``oneOf`` choices that
only assert required fields) but keeps the shape, so a patch that misspells a
field or gives the wrong type still fails.

See ``kuberay/crd_schemas.py`` for where the schemas come from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

SCHEMA_DIR = Path(__file__).with_name("schemas")

#: (apiVersion, kind) → schema file under ``kuberay/schemas/``.
SCHEMAS: dict[tuple[str, str], str] = {
    ("ray.io/v1", "RayService"): "rayservice-ray-v1.json",
    ("ray.io/v1", "RayCluster"): "raycluster-ray-v1.json",
    ("ray.io/v1", "RayJob"): "rayjob-ray-v1.json",
    ("v1", "Secret"): "secret-v1.json",
    ("v1", "ConfigMap"): "configmap-v1.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor-monitoring-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json",
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): "kustomization-v1beta1.json",
    ("kustomize.config.k8s.io/v1alpha1", "Component"): "component-v1alpha1.json",
}


class ManifestError(ValueError):
    """A manifest that does not parse, has no known schema, or violates its schema."""


@dataclass(frozen=True)
class Finding:
    """One schema violation, located by file, document index and JSON path."""

    source: str
    document: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}[{self.document}] {self.path or '/'}: {self.message}"


@cache
def load_schema(api_version: str, kind: str, *, partial: bool = False) -> dict[str, Any]:
    """The schema for ``apiVersion``/``kind`` (without ``required`` when ``partial``)."""
    try:
        name = SCHEMAS[(api_version, kind)]
    except KeyError:
        known = ", ".join(f"{a} {k}" for a, k in sorted(SCHEMAS))
        raise ManifestError(f"no schema for {api_version} {kind}; known kinds: {known}") from None
    schema: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text())
    Draft202012Validator.check_schema(schema)
    return _without_required(schema) if partial else schema


@cache
def _validator(api_version: str, kind: str, partial: bool) -> Draft202012Validator:
    return Draft202012Validator(load_schema(api_version, kind, partial=partial))


def validate_document(
    document: Mapping[str, Any],
    *,
    source: str = "<document>",
    index: int = 0,
    partial: bool = False,
) -> list[Finding]:
    """Schema violations of one parsed manifest (empty when it is valid)."""
    if not isinstance(document, Mapping):
        return [Finding(source, index, "", f"expected a mapping, got {type(document).__name__}")]
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [Finding(source, index, "", "apiVersion and kind are required strings")]
    try:
        validator = _validator(api_version, kind, partial)
    except ManifestError as exc:
        return [Finding(source, index, "", str(exc))]
    return [
        Finding(source, index, error.json_path.removeprefix("$"), error.message)
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    ]


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file (``yaml.safe_load_all``)."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: does not parse: {exc}") from exc
    return docs


def validate_file(path: Path, *, partial: bool = False) -> list[Finding]:
    """Violations of every document in a manifest file."""
    findings: list[Finding] = []
    for i, doc in enumerate(load_documents(path)):
        findings.extend(validate_document(doc, source=str(path), index=i, partial=partial))
    return findings


def validate_documents(documents: Iterable[Mapping[str, Any]], *, source: str) -> list[Finding]:
    """Violations of already-parsed documents, e.g. a rendered overlay."""
    findings: list[Finding] = []
    for i, doc in enumerate(documents):
        findings.extend(validate_document(doc, source=source, index=i))
    return findings


def _without_required(node: Any) -> Any:
    """A copy of a schema that accepts any subset of the fields it describes."""
    if isinstance(node, list):
        return [_without_required(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_required(v) for k, v in node.items() if k != "required"}
    one_of = out.get("oneOf")
    if isinstance(one_of, list) and all(choice == {} for choice in one_of):
        del out["oneOf"]  # it only chose between required fields
    return out
