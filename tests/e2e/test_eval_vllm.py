"""``fenceline eval --engine vllm``: the bundled SmolLM2 with the project's adapter, on the
real vLLM CPU engine, through the same engine code a Serve replica runs.

Greedy decoding is deterministic, so the test asserts what was measured on these
three clean invoices (seeds 5000-5002, the first three of the 60-invoice eval in
docs/extraction.md): at least two SUCCEEDED with every field equal to the truth,
and no false accept. A regression of the contract, grounding, the grammar, the
engine-level compact JSON or the adapter shows here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployments import model_prepare
from deployments.pools import load_pools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_the_adapter_extracts_clean_invoices_exactly(tmp_path: Path) -> None:
    assert model_prepare.default_model_dir().exists(), "run `make model` (make test does)"
    pool = load_pools(None).pool("short")
    assert pool.lora is not None, "the CPU default serves the project's adapter"
    out = tmp_path / "eval"
    result = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "eval", "--engine", "vllm", "--pool", "short",
         "-n", "3", "--seed", "5000", "--variants", "clean", "--max-line-items", "8",
         "--concurrency", "3", "--report", str(out)],
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert result.stderr.count("eval: ") >= 3  # one progress line per invoice
    # the engine shuts down once: AsyncLLM.__del__ at exit printed a TypeError before
    assert "Exception ignored" not in result.stderr, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["engine"] == "vllm" and report["enforce_eager"] is True
    assert report["model"] == "smollm2-135m-instruct" and report["pool"] == "short"
    assert report["contracts"] == ["fenceline.extraction/2"]
    assert report["invoices"] == 3 and report["false_accepts"] == []
    exact = [r for r in report["rows"] if r["outcome"] == "SUCCEEDED" and r["exact_match"]]
    assert len(exact) >= 2, [(r["id"], r["outcome"], r["differing_fields"]) for r in report["rows"]]
    # Bounded generation: every answer finished well inside its derived max_tokens.
    assert all(r["completion_tokens"] is not None for r in report["rows"])
    assert max(r["completion_tokens"] for r in report["rows"]) <= 400
