"""``fenceline eval --dataset FILE.jsonl`` and ``--export``: the file format end to end.

The engine is an in-process :data:`~benchmarks.eval_engines.ExtractFn` that
answers each invoice with the generator's ground truth (its answer format is
the one place here that knows the extraction contract: :func:`_answer`), so
every number in the report is known in advance.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import benchmarks.eval as eval_cli
from benchmarks.eval_dataset import load_dataset, record_from_generated
from benchmarks.eval_engines import EngineAnswer, ExtractFn
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_corpus
from pipeline.extraction import answer_for, document_in_prompt, shown_document

MAX_LINES = 4
VARIANTS = (Variant.CLEAN, Variant.CLEAN, Variant.HOMOGLYPH_SUPPLIER, Variant.PROMPT_INJECTION)
CORPUS = generate_corpus(4, seed=7, variants=VARIANTS, max_line_items=MAX_LINES)
REPORT_KEYS = {
    "invoices",
    "succeeded",
    "review_required",
    "failed",
    "false_accepts",
    "decision_accuracy",
    "fields",
    "output_tokens_mean",
    "invoices_per_minute",
    "review_rate_by_reason",
    "skipped",
    "ignored_keys",
}


def _answer(invoice: GeneratedInvoice) -> str:
    """A perfect model's answer in the default contract."""
    return answer_for(invoice.truth, invoice.ocr_text)


def truthful(corpus: list[GeneratedInvoice] = CORPUS) -> ExtractFn:
    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> EngineAnswer:
        shown = document_in_prompt(messages)
        (invoice,) = [inv for inv in corpus if shown_document(inv.ocr_text) == shown]
        return EngineAnswer(_answer(invoice), completion_tokens=100)

    return extract


@pytest.fixture
def run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, dict[str, Any] | None, str, str]]:
    """``main([...])`` with the truthful engine; returns (exit, report, stdout, stderr)."""
    monkeypatch.setattr(eval_cli, "openai_extract", lambda *_a, **_k: truthful())

    def go(*argv: str) -> tuple[int, dict[str, Any] | None, str, str]:
        out = tmp_path / "report"
        code = eval_cli.main(
            ["--base-url", "http://unused", "--model", "m", "--report", str(out), *argv]
        )
        printed = capsys.readouterr()
        path = out / "report.json"
        report = json.loads(path.read_text()) if path.exists() else None
        return code, report, printed.out, printed.err

    return go


def _export(path: Path) -> list[dict[str, Any]]:
    code = eval_cli.main(
        ["--export", "4", str(path), "--seed", "7", "--max-line-items", str(MAX_LINES),
         "--variants", ",".join(v.value for v in VARIANTS)]
    )  # fmt: skip
    assert code == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return path


def test_export_round_trip(tmp_path: Path) -> None:
    lines = _export(tmp_path / "gen.jsonl")
    assert [line["id"] for line in lines] == [f"gen-{i.seed}-{i.variant.value}" for i in CORPUS]
    first = lines[0]
    assert set(first) == {"id", "ocr_text", "truth", "master_data", "expected_decision", "today"}
    assert isinstance(first["truth"]["gross_total"], str) and "." in first["truth"]["gross_total"]
    assert "evidence" not in json.dumps(first["truth"])  # values only
    dataset = load_dataset(tmp_path / "gen.jsonl")
    assert dataset.skipped == [] and dataset.ignored_keys == []
    for case, invoice in zip(dataset.cases, CORPUS, strict=True):
        assert case.record == record_from_generated(invoice)
        assert case.record.tenant_master_data() == invoice.master_data
        assert case.record.validation_date() == invoice.today
        assert case.record.truth.gross_total == invoice.truth.gross_total.value  # type: ignore[union-attr]


def test_dataset_scores_like_the_generator(
    run: Callable[..., tuple[int, dict[str, Any] | None, str, str]], tmp_path: Path
) -> None:
    path = tmp_path / "gen.jsonl"
    _export(path)
    code, from_file, _, err = run("--dataset", str(path))
    assert code == 0 and from_file is not None
    assert REPORT_KEYS <= set(from_file)
    assert from_file["invoices"] == 4 and from_file["false_accepts"] == []
    # A model that ignores the injected text is right to be accepted.
    assert from_file["decision_accuracy"] == 1.0
    assert from_file["succeeded"] == 3 and from_file["review_required"] == 1
    rates = from_file["review_rate_by_reason"]
    assert rates["supplier_confusable"] == 0.25 and set(rates.values()) == {0.25}
    assert from_file["output_tokens_mean"] == 100.0
    assert all(f["precision"] == f["recall"] == 1.0 for f in from_file["fields"].values())
    assert (tmp_path / "report" / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert "eval: 4/4 · SUCCEEDED 3 REVIEW 1 FAILED 0" in err
    code, generated, _, _ = run(
        "-n", "4", "--seed", "7", "--max-line-items", str(MAX_LINES),
        "--variants", ",".join(v.value for v in VARIANTS),
    )  # fmt: skip
    assert code == 0 and generated is not None
    keep = ("succeeded", "review_required", "false_accepts", "fields", "decision_accuracy")
    assert {k: generated[k] for k in keep} == {k: from_file[k] for k in keep}
    assert set(generated) - {"seed", "variants", "max_line_items"} == set(from_file) - {"dataset"}


def test_a_false_accept_is_counted_and_listed_with_its_fields(
    run: Callable[..., tuple[int, dict[str, Any] | None, str, str]], tmp_path: Path
) -> None:
    lines = _export(tmp_path / "gen.jsonl")
    # The truth disagrees with the document, which the model transcribes faithfully.
    lines[0]["truth"]["invoice_number"] = "X-0000"
    lines[0]["truth"]["gross_total"] = "1.00"
    # Right values, but the dataset says this one needs review.
    lines[1]["expected_decision"] = "REVIEW_REQUIRED"
    code, report, out, _ = run("--dataset", str(_write(tmp_path / "fa.jsonl", lines)))
    assert code == 0 and report is not None
    assert report["false_accepts"] == [
        {
            "id": lines[0]["id"],
            "fields": ["invoice_number", "gross_total"],
            "expected": "SUCCEEDED",
        },
        {"id": lines[1]["id"], "fields": [], "expected": "REVIEW_REQUIRED"},
    ]
    assert report["decision_accuracy"] == 0.75
    assert report["fields"]["invoice_number"]["precision"] == 0.75
    assert "false accepts: 2" in out
    assert f"{lines[0]['id']}: invoice_number, gross_total" in out
    assert f"{lines[1]['id']}: expected REVIEW_REQUIRED" in out
    assert len(out.splitlines()) <= 40


def test_bad_lines_are_reported_with_their_number_and_skipped(
    run: Callable[..., tuple[int, dict[str, Any] | None, str, str]], tmp_path: Path
) -> None:
    good = _export(tmp_path / "gen.jsonl")
    unknown_inner = json.loads(json.dumps(good[1]))
    unknown_inner["truth"]["line_items"][0]["sku"] = "A-1"
    unknown_master = json.loads(json.dumps(good[2]))
    unknown_master["master_data"]["suppliers"][0]["country"] = "DE"
    wrong_type = json.loads(json.dumps(good[3]))
    wrong_type["truth"]["net_total"] = 12.5
    missing = {k: v for k, v in good[3].items() if k != "ocr_text"}
    extra_top = {**good[0], "comment": "from the March batch", "source": "scan"}
    path = _write(
        tmp_path / "mixed.jsonl",
        [extra_top, '{"id": "broken", ', unknown_inner, unknown_master, wrong_type, missing,
         "[1, 2]", ""],
    )  # fmt: skip
    code, report, out, err = run("--dataset", str(path))
    assert code == 0 and report is not None
    assert report["invoices"] == 1
    errors = {item["line"]: item["error"] for item in report["skipped"]}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7]
    assert errors[2].startswith("not JSON")
    assert errors[3] == "unknown key 'truth.line_items.0.sku'"
    assert errors[4] == "unknown key 'master_data.suppliers.0.country'"
    assert errors[5].startswith("truth.net_total: must be a decimal string")
    assert errors[6] == "missing required key 'ocr_text'"
    assert errors[7] == "must be a JSON object, got list"
    assert report["ignored_keys"] == ["comment", "source"]
    assert f"{path}: line 3: unknown key 'truth.line_items.0.sku'" in err
    assert "skipped lines: 6" in out and "ignored top-level keys: comment, source" in out


def test_nothing_evaluable_is_a_clear_error(
    run: Callable[..., tuple[int, dict[str, Any] | None, str, str]], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, report, _, err = run("--dataset", str(empty))
    assert code == 1 and report is None
    assert f"nothing to evaluate in {empty}: the file has no lines" in err

    bad = _write(tmp_path / "bad.jsonl", ["not json", {"id": "x"}])
    code, report, _, err = run("--dataset", str(bad))
    assert code == 1 and report is None
    assert "all 2 lines were refused" in err and "line 1: not JSON" in err

    code, _, _, err = run("--dataset", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "no dataset file" in err


def test_a_line_in_another_encoding_is_skipped_not_fatal(tmp_path: Path) -> None:
    good = _export(tmp_path / "gen.jsonl")[0]
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(good).encode() + b"\n" + '{"id": "Müller"}\n'.encode("latin-1")
    )
    dataset = load_dataset(path)
    assert [c.record.id for c in dataset.cases] == [good["id"]]  # a BOM is tolerated
    assert dataset.skipped == [{"line": 2, "error": "not UTF-8: invalid start byte"}]


def test_master_data_and_validation_date_default_from_the_truth(tmp_path: Path) -> None:
    (line,) = _export(tmp_path / "gen.jsonl")[:1]
    del line["master_data"], line["today"], line["expected_decision"]
    dataset = load_dataset(_write(tmp_path / "min.jsonl", [line]))
    record = dataset.cases[0].record
    truth = line["truth"]
    md = record.tenant_master_data()
    assert [(s.name, s.vat_id, s.ibans) for s in md.suppliers] == [
        (truth["supplier"]["name"], truth["supplier"]["vat_id"], frozenset({truth["iban"]}))
    ]
    assert md.permitted_currencies == frozenset({truth["currency"]})
    assert record.validation_date().isoformat() == truth["issue_date"]
    assert record.expected_decision is None
