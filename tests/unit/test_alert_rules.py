"""The alert rules (kuberay/monitoring/prometheusrule.yaml) checked and unit-tested by promtool.

``promtool check rules`` validates every expression; ``promtool test rules`` runs
alerts.test.yaml on synthetic series. Every alert must have a case where it fires
and one where it stays silent, so a rule that can never fire fails here. A missing
promtool is a failure, not a skip: ``make test`` installs it (Debian's prometheus).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

MONITORING = Path(__file__).resolve().parents[2] / "kuberay" / "monitoring"
RULE = MONITORING / "prometheusrule.yaml"
TESTS = MONITORING / "alerts.test.yaml"


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is required (apt-get install prometheus; make test installs it)"
    return path


def alert_names() -> set[str]:
    doc = yaml.safe_load(RULE.read_text())
    return {r["alert"] for g in doc["spec"]["groups"] for r in g["rules"] if "alert" in r}


def extract(tmp_path: Path) -> Path:
    doc = yaml.safe_load(RULE.read_text())
    assert doc["kind"] == "PrometheusRule"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    return tmp_path


def run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    got = run(promtool(), "check", "rules", "rules.yaml", cwd=extract(tmp_path))
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"SUCCESS: {sum(1 for _ in _rules())} rules found" in got.stdout


def test_every_alert_fires_and_stays_silent_on_synthetic_series(tmp_path: Path) -> None:
    got = run(promtool(), "test", "rules", TESTS.name, cwd=extract(tmp_path))
    assert got.returncode == 0, got.stdout + got.stderr
    cases: dict[str, list[Any]] = {}
    for test in yaml.safe_load(TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(case["exp_alerts"])
    for name in alert_names():
        assert any(cases.get(name, [])), f"{name}: no case where it fires"
        assert any(c == [] for c in cases.get(name, [])), f"{name}: no case where it is silent"


def test_a_wrong_expectation_fails_promtool(tmp_path: Path) -> None:
    """The harness can fail: a case expecting a silent alert to fire is reported."""
    where = extract(tmp_path)
    broken = yaml.safe_load(TESTS.read_text())
    case = broken["tests"][0]["alert_rule_test"][0]
    case["eval_time"] = "1m"  # before any burn: nothing fires, so the expectation is wrong
    (where / TESTS.name).write_text(yaml.safe_dump(broken))
    got = run(promtool(), "test", "rules", TESTS.name, cwd=where)
    assert got.returncode != 0
    assert "FAILED" in got.stdout + got.stderr


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULE.read_text())
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]
