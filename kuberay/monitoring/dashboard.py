"""Writes kuberay/monitoring/grafana-dashboard.json and its ConfigMap
(``python -m kuberay.monitoring.dashboard``).

The dashboard is generated so its queries stay few and regular; the committed JSON
is what Grafana imports by hand, and ``grafana-dashboard-configmap.yaml`` carries the
same JSON in a ConfigMap labelled ``grafana_dashboard: "1"`` (the Grafana sidecar's
default label), which ``kuberay/monitoring/kustomization.yaml`` ships with the
PrometheusRule, and every overlay through ``kuberay/base``. tests/unit/test_dashboard.py checks that every query names
a series the code exports (``ray_`` + a registry family, as the Ray metrics agent
exports it) or a recording rule of prometheusrule.yaml.
"""

# ruff: noqa: E501  (PromQL reads better on one line than split across string fragments)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).with_name("grafana-dashboard.json")
CONFIGMAP_OUT = Path(__file__).with_name("grafana-dashboard-configmap.yaml")
#: The ConfigMap's name and the key Grafana's sidecar writes to a file.
CONFIGMAP_NAME, CONFIGMAP_KEY = "fenceline-grafana-dashboard", "fenceline.json"

#: (row title, [(panel title, unit, [PromQL, ...])]).
ROWS: list[tuple[str, list[tuple[str, str, list[str]]]]] = [
    (
        "Intake",
        [
            ("Acceptances by outcome", "reqps", [
                "sum by (outcome) (rate(ray_fenceline_acceptance_seconds_count[5m]))",
            ]),
            ("Acceptance p99", "s", [
                "histogram_quantile(0.99, sum by (le) (rate(ray_fenceline_acceptance_seconds_bucket[5m])))",
            ]),
            ("Acceptance SLO bad ratio (1h)", "percentunit", ["fenceline:acceptance_bad_ratio:rate1h"]),
        ],
    ),
    (
        "Backlog and age",
        [
            ("Runnable backlog by tenant", "short", ["sum by (tenant) (ray_fenceline_jobs_runnable)"]),
            ("Oldest eligible job by tenant", "s", [
                "max by (tenant) (ray_fenceline_oldest_eligible_job_seconds)",
            ]),
            ("Outbox publication age", "s", ["max(ray_fenceline_outbox_oldest_unpublished_seconds)"]),
            ("Broker lag p95", "s", [
                "histogram_quantile(0.95, sum by (le) (rate(ray_fenceline_broker_lag_seconds_bucket[5m])))",
            ]),
            ("Inbox backlog", "short", ["max(ray_fenceline_inbox_backlog_jobs)"]),
            ("Dead letters waiting / oldest", "short", [
                "max(ray_fenceline_dead_letters_waiting)",
                "max(ray_fenceline_dead_letter_oldest_seconds)",
            ]),
        ],
    ),
    (
        "Attempts, retries and completion",
        [
            ("Completion p50/p95/p99 (accept → settled)", "s", [
                f"histogram_quantile({q}, sum by (le) (rate(ray_fenceline_job_completion_seconds_bucket[15m])))"
                for q in ("0.5", "0.95", "0.99")
            ]),
            ("Outcomes by state and reason", "short", [
                "sum by (state, reason) (increase(ray_fenceline_job_outcomes_total[1h]))",
            ]),
            ("Retries by reason", "short", [
                "sum by (reason) (rate(ray_fenceline_job_retries_total[5m]))",
            ]),
            ("Running jobs by tenant", "short", ["sum by (tenant) (ray_fenceline_jobs_running)"]),
            ("Completion SLO bad ratio (1h)", "percentunit", ["fenceline:completion_bad_ratio:rate1h"]),
        ],
    ),
    (
        "Admission",
        [
            ("TPM / RPM used of limit by scope", "percentunit", [
                f'max by (scope) (ray_fenceline_admission_usage{{dimension="{d}"}}) / max by (scope) (ray_fenceline_admission_limit{{dimension="{d}"}})'
                for d in ("tpm", "rpm")
            ]),
            ("Permits / token budget used of limit by scope", "percentunit", [
                f'max by (scope) (ray_fenceline_admission_usage{{dimension="{d}"}}) / max by (scope) (ray_fenceline_admission_limit{{dimension="{d}"}})'
                for d in ("permits", "concurrent_tokens")
            ]),
            ("Queued acquirers / 429 cooldown by scope", "short", [
                "max by (scope) (ray_fenceline_admission_queued)",
                "max by (scope) (ray_fenceline_admission_cooldown_seconds)",
            ]),
            ("Limiter reachable", "short", ["min(ray_fenceline_admission_limiter_up)"]),
            ("Fail-closed refusals and emergency grants", "short", [
                "sum(rate(ray_fenceline_admission_fail_closed_total[5m]))",
                "sum(rate(ray_fenceline_admission_emergency_grants_total[5m]))",
            ]),
        ],
    ),
    (
        "Engines",
        [
            ("TTFT p95 by pool", "s", [
                "histogram_quantile(0.95, sum by (le, pool) (rate(ray_fenceline_engine_ttft_seconds_bucket[5m])))",
            ]),
            ("ITL p95 by pool", "s", [
                "histogram_quantile(0.95, sum by (le, pool) (rate(ray_fenceline_engine_itl_seconds_bucket[5m])))",
            ]),
            ("KV cache usage by pool", "percentunit", ["max by (pool) (ray_fenceline_engine_kv_cache_usage_ratio)"]),
            ("Preemptions by pool", "short", [
                "sum by (pool) (rate(ray_fenceline_engine_preemptions_total[5m]))",
            ]),
            ("Requests running / waiting", "short", [
                "sum by (pool) (ray_fenceline_engine_requests_running)",
                "sum by (pool) (ray_fenceline_engine_requests_waiting)",
            ]),
        ],
    ),
    (
        "OCR",
        [
            ("Pages OCR'd per second by outcome", "short", [
                "sum by (outcome) (rate(ray_fenceline_ocr_pages_total[5m]))",
            ]),
            ("Seconds per page p50/p95", "s", [
                f"histogram_quantile({q}, sum by (le) (rate(ray_fenceline_ocr_page_seconds_bucket[5m])))"
                for q in ("0.5", "0.95")
            ]),
            ("Pages waiting for a grant", "short", ["sum(ray_fenceline_ocr_pages_waiting)"]),
        ],
    ),
    (
        "Validation and review",
        [
            ("Review queue by tenant", "short", ["sum by (tenant) (ray_fenceline_review_queue_jobs)"]),
            ("Oldest job in review", "s", ["max by (tenant) (ray_fenceline_review_oldest_seconds)"]),
            ("Review decision p95", "s", [
                "histogram_quantile(0.95, sum by (le, decision) (rate(ray_fenceline_review_decision_seconds_bucket[1h])))",
            ]),
        ],
    ),
    (
        "Deliveries",
        [
            ("Delivery attempts by outcome and endpoint state", "short", [
                "sum by (outcome, endpoint_state) (rate(ray_fenceline_delivery_attempts_total[5m]))",
            ]),
            ("Delivery lag (oldest pending) by endpoint state", "s", [
                "max by (endpoint_state) (ray_fenceline_delivery_oldest_pending_seconds)",
            ]),
            ("Deliveries pending by endpoint state", "short", [
                "max by (endpoint_state) (ray_fenceline_deliveries_pending)",
            ]),
            ("Delivery attempt p95", "s", [
                "histogram_quantile(0.95, sum by (le) (rate(ray_fenceline_delivery_attempt_seconds_bucket[5m])))",
            ]),
            ("Delivery alerts by kind", "short", [
                "sum by (kind) (increase(ray_fenceline_delivery_alerts_total[1h]))",
            ]),
        ],
    ),
    (
        "Spend",
        [
            ("Spend this period by tenant and kind", "short", [
                "max by (tenant, kind) (ray_fenceline_tenant_spend)",
            ]),
            ("Reconciled / estimated by tenant", "percentunit", [
                'max by (tenant) (ray_fenceline_tenant_spend{kind="reconciled"}) / max by (tenant) (ray_fenceline_tenant_spend{kind="estimated"})',
            ]),
        ],
    ),
]  # fmt: skip


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for title, row in ROWS:
        panels.append(
            {"id": pid, "type": "row", "title": title, "collapsed": False,
             "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}
        )  # fmt: skip
        pid, y = pid + 1, y + 1
        for i, (ptitle, unit, exprs) in enumerate(row):
            panels.append(
                {
                    "id": pid,
                    "type": "timeseries",
                    "title": ptitle,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                    "targets": [
                        {"refId": chr(ord("A") + k), "expr": e} for k, e in enumerate(exprs)
                    ],
                }
            )
            pid += 1
        y += ((len(row) + 2) // 3) * 8
    return {
        "title": "Fenceline",
        "uid": "fenceline",
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "tags": ["fenceline"],
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
        },
        "panels": panels,
    }


def dashboard_text() -> str:
    return json.dumps(dashboard(), indent=1) + "\n"


def configmap_text() -> str:
    """The ConfigMap document (YAML) holding the dashboard for Grafana's sidecar."""
    document = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP_NAME,
            "labels": {"grafana_dashboard": "1", "app.kubernetes.io/name": "fenceline"},
        },
        "data": {CONFIGMAP_KEY: dashboard_text()},
    }
    header = "# Generated by python -m kuberay.monitoring.dashboard; do not edit.\n"
    return header + yaml.dump(document, Dumper=_BlockDumper, sort_keys=False)


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks (the JSON stays readable in the file)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def main() -> None:
    OUT.write_text(dashboard_text())
    CONFIGMAP_OUT.write_text(configmap_text())


if __name__ == "__main__":
    main()
