"""``fenceline eval --engine vllm``: the bundled SmolLM2 on the real vLLM CPU engine.

Asserts that the evaluation runs end to end through the same engine code a Serve
replica uses and that its report is consistent with itself; it asserts nothing
about accuracy (a 135M model is weak, and the numbers are reported, not tuned).
The run is small (3 invoices, short output cap) to keep CI short; the 20-invoice
figures are measured with the command in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployments import model_prepare

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_eval_on_the_bundled_model_writes_a_consistent_report(tmp_path: Path) -> None:
    assert model_prepare.default_model_dir().exists(), "run `make model` (make test does)"
    out = tmp_path / "eval"
    result = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "eval", "--engine", "vllm", "-n", "3",
         "--max-line-items", "2", "--max-tokens", "192", "--concurrency", "3",
         "--report", str(out)],
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert result.stderr.count("eval: ") >= 3  # one progress line per invoice
    assert "false accepts:" in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert (out / "report.png").stat().st_size > 0
    assert report["invoices"] == 3
    assert report["engine"] == "vllm" and report["enforce_eager"] is True
    assert report["model"] == "smollm2-135m-instruct" and report["pool"] == "long"
    cells = sum(sum(row.values()) for row in report["confusion"].values())
    assert cells == len(report["rows"]) == 3
    assert report["succeeded"] + report["review_required"] + report["failed"] == 3
    outcomes = {r["outcome"] for r in report["rows"]}
    assert outcomes <= {"SUCCEEDED", "REVIEW_REQUIRED", "MALFORMED", "ENGINE_ERROR"}
    # Every invoice reached the engine: none failed before or around it.
    assert all("ContextTooLong" not in (r["error"] or "") for r in report["rows"])
