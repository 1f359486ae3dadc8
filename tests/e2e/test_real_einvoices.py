"""Real e-invoices on the real engine: ``fenceline eval --engine vllm`` over the five
vendored ZUGFeRD/Factur-X PDFs (tests/data/einvoices, see its NOTICE).

The dataset is built the way ``fenceline corpus einvoices`` builds it: the truth from
each PDF's embedded XML, the text from ``pdftotext -layout``, the expected decision
from what contract v2 can hold. The bundled SmolLM2 with the project's adapter reads
pages nobody here wrote, so the test asserts safety, not accuracy:

* no false accept: an invoice is SUCCEEDED only with every value equal to its XML;
* every invoice contract v2 cannot hold ends in REVIEW_REQUIRED, never elsewhere.

Three of the five run here: the two contract v2 can hold and the credit note, the
shortest page it cannot. On the 2-core CPU the model reads real pages at about one a
minute, and the two longest (`EN16931_Rabatte`, the EXTENDED `Kostenrechnung`: half
the text) took half the run; their decisions from perfect answers are asserted in
``tests/unit/test_einvoice_oracle.py``.

Needs poppler-utils (``make corpus-tools``) and the prepared model (``make model``);
``make test`` provides both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.corpus.records import record_from_pdf
from deployments import model_prepare

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
READ_BY_THE_MODEL = (
    "MustangGnuaccountingBeispielRE-20190610_507.pdf",
    "XRECHNUNG_Einfach.pdf",
    "Avoir_FR_type381_BASIC.pdf",  # a credit note: contract v2 cannot hold it
)


def test_real_einvoices_are_never_falsely_accepted(tmp_path: Path) -> None:
    assert model_prepare.default_model_dir().exists(), "run `make model` (make test does)"
    sources: dict[str, str] = json.loads((DATA / "sources.json").read_text())
    lines = [record_from_pdf(DATA / name, sources[name]).line() for name in READ_BY_THE_MODEL]
    expected = {line["id"]: line["expected_decision"] for line in lines}
    assert sorted(expected.values()) == ["REVIEW_REQUIRED", "SUCCEEDED", "SUCCEEDED"]
    dataset = tmp_path / "einvoices.jsonl"
    dataset.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    out = tmp_path / "eval"
    result = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "eval", "--engine", "vllm", "--pool", "long",
         "--dataset", str(dataset), "--concurrency", str(len(lines)), "--report", str(out)],
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    # The dataset format takes what real invoices print (a null VAT id): nothing refused.
    assert report["skipped"] == [] and report["invoices"] == len(lines)
    rows = {row["id"]: row for row in report["rows"]}
    assert set(rows) == set(expected)
    assert report["false_accepts"] == [], report["false_accepts"]
    for doc_id, row in rows.items():
        outcome = (doc_id, row["outcome"], row["reasons"], row.get("differing_fields"))
        if row["outcome"] == "SUCCEEDED":
            assert row["exact_match"], outcome  # SUCCEEDED implies every field equals the XML
            assert expected[doc_id] == "SUCCEEDED", outcome
        if expected[doc_id] == "REVIEW_REQUIRED":
            assert row["outcome"] == "REVIEW_REQUIRED", outcome
