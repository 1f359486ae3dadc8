"""The Grafana dashboard and the alert rules name only series the code exports.

Exported names are read from the registries themselves (the Ray metrics agent
exports each ``fenceline_*`` sample as ``ray_`` + its name, deployments/ray_metrics.py),
so a renamed metric fails here instead of leaving an empty panel or a silent alert.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from cluster.admission import AdmissionClientMetrics
from deployments.engine_metrics import EngineMetrics
from deployments.ocr_pool import OcrMetrics
from kuberay.monitoring.dashboard import OUT, dashboard
from pipeline.admission import AdmissionConfig, AdmissionPolicy, admission_registry
from pipeline.api.metrics import IntakeMetrics
from pipeline.delivery import AckMetrics
from pipeline.delivery.metrics import DeliveryMetrics
from pipeline.jobs import JobMetrics
from pipeline.messaging import BrokerMetrics
from pipeline.tenants import SpendMetrics

RULES = Path(__file__).resolve().parents[2] / "kuberay" / "monitoring" / "prometheusrule.yaml"
_SERIES = re.compile(r"\b(ray_fenceline_[a-z0-9_]+|fenceline:[a-z0-9_:]+)")


def exported() -> set[str]:
    registries = [
        IntakeMetrics().registry,
        BrokerMetrics(CollectorRegistry()).registry,
        JobMetrics(CollectorRegistry()).registry,
        DeliveryMetrics().registry,
        AckMetrics(CollectorRegistry()).registry,
        EngineMetrics("short").registry,
        AdmissionClientMetrics().registry,
        admission_registry(AdmissionPolicy(AdmissionConfig(scope="s"))),
        SpendMetrics(CollectorRegistry()).registry,
        OcrMetrics().registry,
    ]
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            suffixes = {
                "counter": ("_total",),
                "histogram": ("_bucket", "_count", "_sum"),
            }.get(family.type, ("",))
            names |= {f"ray_{family.name}{s}" for s in suffixes}
    rules = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    names |= {r["record"] for g in rules for r in g["rules"] if "record" in r}
    return names


def queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def test_committed_dashboard_is_the_generated_one() -> None:
    assert json.loads(OUT.read_text()) == dashboard(), "run python -m kuberay.monitoring.dashboard"


def test_every_dashboard_query_names_an_exported_series() -> None:
    known = exported()
    for expr in queries():
        named = _SERIES.findall(expr)
        assert named, f"query names no Fenceline series: {expr}"
        assert set(named) <= known, f"{expr}: unknown {set(named) - known}"


def test_every_alert_rule_names_an_exported_series() -> None:
    known = exported()
    for g in yaml.safe_load(RULES.read_text())["spec"]["groups"]:
        for r in g["rules"]:
            named = set(_SERIES.findall(r["expr"]))
            assert named and named <= known, f"{r.get('alert') or r['record']}: {named - known}"


def test_the_check_catches_a_renamed_metric() -> None:
    assert "ray_fenceline_engine_kv_cache_usage" not in exported()
    assert "ray_fenceline_engine_kv_cache_usage_ratio" in exported()
    assert "ray_fenceline_job_completion_seconds_bucket" in exported()


def test_dashboard_covers_each_area_the_issue_names() -> None:
    rows = {p["title"] for p in dashboard()["panels"] if p["type"] == "row"}
    assert rows == {
        "Intake",
        "Backlog and age",
        "Attempts, retries and completion",
        "Admission",
        "Engines",
        "OCR",
        "Validation and review",
        "Deliveries",
        "Spend",
    }
