"""``fenceline eval --dataset FILE.jsonl`` and ``--export``: the file format end to end.

The engine is an in-process :data:`~benchmarks.eval.engines.ExtractFn` that
answers each invoice with the generator's ground truth (its answer format is
the one place here that knows the extraction contract: :func:`_answer`), so
every number in the report is known in advance.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import benchmarks.eval.run as eval_cli
from benchmarks.eval.bounds import false_accept_bound
from benchmarks.eval.dataset import Case, load_dataset, parse_line
from benchmarks.eval.engines import EngineAnswer, ExtractFn
from benchmarks.eval.generated import record_from_generated
from benchmarks.eval.scoring import evaluate_one, truth_values
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_corpus
from pipeline.extraction import answer_for, document_in_prompt, shown_document
from pipeline.invoice import SCHEMA_V1

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
    assert errors[6] == "missing required key 'ocr_text' (or a 'document' file)"
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


# -- what real invoices print -----------------------------------------------------------------


def _real(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` as a real invoice's truth may read: a supplier with a tax number and no
    VAT id, no currency printed, an amount-only shipping row; with a family and notes."""
    real = json.loads(json.dumps(line))
    truth = real["truth"]
    truth["supplier"]["vat_id"] = None
    truth["currency"] = None
    truth["line_items"].append(
        {"description": "Versand", "quantity": None, "unit_price": None,
         "line_amount": "4.90", "tax_rate": "19"}
    )  # fmt: skip
    del real["master_data"]
    return {**real, "family": "zugferd + letter", "notes": "Steuernummer 201/113/40209 only"}


def test_a_truth_as_real_invoices_print_it_is_evaluated_not_refused(tmp_path: Path) -> None:
    line = _real(_export(tmp_path / "gen.jsonl")[0])
    dataset = load_dataset(_write(tmp_path / "real.jsonl", [line]))
    assert dataset.skipped == [] and dataset.ignored_keys == []
    record = dataset.cases[0].record
    assert record.truth.supplier.vat_id is None and record.truth.currency is None
    shipping = record.truth.line_items[-1]
    assert shipping.quantity is None and shipping.unit_price is None
    assert str(shipping.line_amount) == "4.90"
    assert record.family == "zugferd+letter" and record.notes == line["notes"]
    # The supplier is on file without a VAT id; no currency is permitted.
    md = record.tenant_master_data()
    assert [(s.name, s.vat_id) for s in md.suppliers] == [(line["truth"]["supplier"]["name"], "")]
    assert md.permitted_currencies == frozenset()
    # Written back, the nulls stay nulls.
    again = record.to_json()
    assert again["truth"]["supplier"]["vat_id"] is None and again["truth"]["currency"] is None
    assert again["truth"]["line_items"][-1]["quantity"] is None
    assert again["family"] == "zugferd+letter"


def test_an_amount_only_row_is_scored_with_no_quantity_and_no_unit_price(tmp_path: Path) -> None:
    line = _real(_export(tmp_path / "gen.jsonl")[0])
    amount_only = parse_line(json.dumps(line))[0].truth
    line["truth"]["line_items"][-1].update(quantity="1", unit_price="4.90")
    one_unit = parse_line(json.dumps(line))[0].truth
    null, read = (
        truth_values(amount_only, schema_version=SCHEMA_V1),
        truth_values(one_unit, schema_version=SCHEMA_V1),
    )
    rows = len(line["truth"]["line_items"])
    assert sum(null["line_items[].quantity"].values()) == rows - 1
    assert sum(null["line_items[].line_amount"].values()) == rows
    assert null["line_items[].line_amount"] == read["line_items[].line_amount"]
    # A quantity read for a row that prints none is a value the truth does not hold.
    assert null["line_items[].quantity"] != read["line_items[].quantity"]
    assert null["line_items[].unit_price"] != read["line_items[].unit_price"]
    assert null["supplier.vat_id"] == null["currency"] == Counter()


def _answering(answer: str) -> ExtractFn:
    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> EngineAnswer:
        return EngineAnswer(answer, completion_tokens=1)

    return extract


def test_a_supplier_without_vat_id_goes_to_review_and_a_null_compares_as_null(
    tmp_path: Path,
) -> None:
    """Master data from a truth without VAT id works and weakens nothing: a faithful
    answer with no VAT id misses a required field; one that reads the document's VAT id
    anyway differs from the truth and from the (empty) one on file. Neither is accepted."""
    line = _export(tmp_path / "gen.jsonl")[0]
    assert line["expected_decision"] == "SUCCEEDED"
    line["truth"]["supplier"]["vat_id"] = None
    del line["master_data"]
    case = Case(parse_line(json.dumps(line))[0])
    invoice = CORPUS[0]
    no_vat = invoice.truth.model_copy(
        update={"supplier": invoice.truth.supplier.model_copy(update={"vat_id": None})}
    )
    silent = asyncio.run(evaluate_one(case, _answering(answer_for(no_vat, invoice.ocr_text))))
    assert silent["outcome"] == "REVIEW_REQUIRED" and not silent["false_accept"]
    assert {"code": "missing_field", "field": "supplier.vat_id"} in [
        {k: d[k] for k in ("code", "field")} for d in silent["reason_details"]
    ]
    assert silent["differing_fields"] == []  # null in the truth, null in the answer
    assert silent["fields"]["supplier.vat_id"] == [0, 0, 0]
    read = asyncio.run(evaluate_one(case, _answering(_answer(invoice))))
    assert read["outcome"] == "REVIEW_REQUIRED" and not read["false_accept"]
    assert "vat_id_mismatch" in read["reasons"]
    assert read["differing_fields"] == ["supplier.vat_id"]


def test_malformed_truths_are_still_refused_with_their_messages(tmp_path: Path) -> None:
    good = _export(tmp_path / "gen.jsonl")[0]

    def refused(change: Callable[[dict[str, Any]], None]) -> str:
        line = json.loads(json.dumps(good))
        change(line)
        with pytest.raises(ValueError) as exc:
            parse_line(json.dumps(line))
        return str(exc.value)

    def item(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda line: line["truth"]["line_items"][0].__setitem__(key, value)

    assert refused(item("quantity", 2)).startswith(
        "truth.line_items.0.quantity: must be a decimal string"
    )
    assert refused(item("unit_price", "12,50")).startswith("truth.line_items.0.unit_price: must")
    assert refused(item("line_amount", None)).startswith("truth.line_items.0.line_amount: must")
    assert refused(lambda x: x["truth"].__setitem__("issue_date", "2024-02-30")) == (
        "truth.issue_date: is not a calendar date: '2024-02-30'"
    )
    assert refused(lambda x: x["truth"].__setitem__("currency", "eur")).startswith(
        "truth.currency: must be an ISO 4217 code"
    )
    assert refused(lambda x: x["truth"]["supplier"].__setitem__("vat_id", 123)) == (
        "truth.supplier.vat_id: must be a string, got int"
    )
    assert refused(lambda x: x["truth"]["supplier"].pop("vat_id")) == (
        "missing required key 'truth.supplier.vat_id'"
    )
    assert refused(lambda x: x.__setitem__("family", "swap++noise")).startswith(
        'family: must be one name or names joined by "+"'
    )
    assert refused(lambda x: x.__setitem__("notes", ["a"])) == "notes: must be a string, got list"


def test_the_report_groups_false_accepts_by_family(
    run: Callable[..., tuple[int, dict[str, Any] | None, str, str]], tmp_path: Path
) -> None:
    lines = _export(tmp_path / "gen.jsonl")
    for line, family in zip(lines, ("letter", "letter", "table+noise", "table"), strict=True):
        line["family"] = family
    lines[0]["truth"]["invoice_number"] = "X-0000"  # the model reads what is printed
    code, report, out, _ = run("--dataset", str(_write(tmp_path / "fam.jsonl", lines)))
    assert code == 0 and report is not None
    families = report["by_family"]
    letter = families["family"]["letter"]
    assert (letter["invoices"], letter["succeeded"], letter["false_accepts"]) == (2, 2, 1)
    assert letter["succeeded_right"] == 1
    assert letter["false_accept_upper_95"] == false_accept_bound(1, 2)
    assert families["transformation"]["table"]["invoices"] == 2
    assert families["transformation"]["noise"]["invoices"] == 1
    assert report["false_accepts"][0]["family"] == "letter"
    assert report["false_accept_upper_95"] == false_accept_bound(1, 4)
    assert f"{lines[0]['id']} [letter]: invoice_number" in out
    table = out.splitlines()
    head = table.index(next(x for x in table if x.startswith("by family")))
    assert table[head + 2].split()[:2] == ["family=letter", "2"]
    assert "1/2 = 50 %, 95 % bound" in table[head + 2]
