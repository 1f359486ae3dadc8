"""The accuracy evaluation against a real HTTP server on loopback.

The server is a third-party stand-in (an OpenAI-compatible provider) and runs
as a real ``http.server`` on 127.0.0.1; it answers with each invoice's ground
truth, or with a chosen fault, so the report's numbers are known in advance.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchmarks.eval.report import render_text
from benchmarks.eval.run import (
    DEFAULT_VARIANTS,
    FIELDS,
    generated,
    main,
    openai_extract,
    run_eval,
    summarise,
)
from benchmarks.eval.scoring import V3_SCORED_FIELDS
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_corpus
from pipeline.extraction import (
    CONTRACT_V1,
    CONTRACT_V2,
    answer_for,
    document_in_prompt,
    prepare_call,
    shown_document,
)
from pipeline.invoice import RULES, Extraction

N = 10
MAX_LINES = 12
CORPUS = generate_corpus(N, seed=0, variants=DEFAULT_VARIANTS, max_line_items=MAX_LINES)

#: ``invoice -> (HTTP status, content)``: a raw string is sent as is; an
#: :class:`Extraction` is what the model means, written in the contract the prompt asks for.
Answer = Callable[[GeneratedInvoice], tuple[int, "str | Extraction"]]


def truthful(invoice: GeneratedInvoice) -> tuple[int, str | Extraction]:
    return 200, invoice.truth


class Provider:
    """A loopback OpenAI-compatible server that knows the corpus' ground truth."""

    def __init__(self, answer: Answer, corpus: list[GeneratedInvoice]) -> None:
        self.answer = answer
        self.corpus = corpus
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append({"path": self.path, "body": body})
                user = body["messages"][-1]["content"]
                shown = document_in_prompt(body["messages"])
                contract = CONTRACT_V1 if shown is None else CONTRACT_V2
                matches = [
                    inv
                    for inv in provider.corpus
                    if shown_document(inv.ocr_text) == shown
                    or (shown is None and all(p in user for p in inv.ocr_text.split("\f")))
                ]
                status, content = (404, "unknown invoice")
                if len(matches) == 1:
                    status, meant = provider.answer(matches[0])
                    content = (
                        meant
                        if isinstance(meant, str)
                        else answer_for(meant, matches[0].ocr_text, contract=contract)
                    )
                payload = (
                    {
                        "choices": [{"message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": len(content)},
                    }
                    if status == 200
                    else {"error": {"message": content}}
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def provider() -> Iterator[Callable[..., Provider]]:
    started: list[Provider] = []

    def start(answer: Answer, corpus: list[GeneratedInvoice] = CORPUS) -> Provider:
        started.append(Provider(answer, corpus))
        return started[-1]

    yield start
    for p in started:
        p.close()


def _run(base_url: str, out: Path, **kwargs: Any) -> tuple[dict[str, Any], Path, Path]:
    extract = openai_extract(base_url, "truth-model", timeout=30)
    return asyncio.run(
        run_eval(
            extract,
            generated(N, seed=0, max_line_items=MAX_LINES),
            out=out,
            meta={"model": "truth-model"},
            **kwargs,
        )
    )


def test_ground_truth_answers_score_100_percent(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    server = provider(truthful)
    report, json_path, png_path = _run(server.base_url, tmp_path / "eval", concurrency=3)

    assert report["micro"]["precision"] == 1.0 and report["micro"]["recall"] == 1.0
    assert report["micro"]["fp"] == 0 and report["micro"]["fn"] == 0 and report["micro"]["tp"] > 0
    for name in FIELDS:
        if name in V3_SCORED_FIELDS:  # a generated invoice states none of contract v3's
            assert name not in report["fields"], name
            continue
        assert report["fields"][name]["recall"] == 1.0, name
    assert report["exact_match"] == 1.0 and report["decision_accuracy"] == 1.0
    assert report["decisions_judged"] == N
    assert report["false_accepts"] == [] and report["failed"] == 0

    clean = sum(1 for inv in CORPUS if inv.truth_decision.value == "SUCCEEDED")
    assert 0 < clean < N
    assert report["invoices"] == N and report["succeeded"] == clean
    assert report["review_required"] == N - clean
    assert report["confusion"]["acceptable"]["SUCCEEDED"] == clean
    assert report["confusion"]["unacceptable"]["REVIEW_REQUIRED"] == N - clean
    assert report["confusion"]["unacceptable"]["SUCCEEDED"] == 0
    assert report["decision_vs_expected"]["REVIEW_REQUIRED"]["REVIEW_REQUIRED"] == N - clean
    # The provider reports len(content) completion tokens per answer.
    lengths = [len(answer_for(inv.truth, inv.ocr_text)) for inv in CORPUS]
    assert report["output_tokens_mean"] == round(sum(lengths) / N, 1)
    assert report["output_tokens_reported"] == N
    assert report["invoices_per_minute"] > 0

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    assert png_path.exists() and png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_path.stat().st_size > 10_000


def test_requests_ask_for_structured_output(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    server = provider(truthful)
    _run(server.base_url, tmp_path)
    assert len(server.requests) == N
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "truth-model" and body["temperature"] == 0
    assert body["max_tokens"] > 0
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "invoice"
    assert fmt["json_schema"]["schema"] == prepare_call(CORPUS[0].ocr_text).json_schema
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def _wrong_gross(invoice: GeneratedInvoice) -> tuple[int, str | Extraction]:
    """The model took the printed net total for the gross total (its evidence too)."""
    truth = invoice.truth
    assert truth.gross_total is not None and truth.net_total is not None
    assert truth.net_total.value != truth.gross_total.value
    return 200, truth.model_copy(update={"gross_total": truth.net_total})


def _faulty(invoice: GeneratedInvoice) -> tuple[int, str | Extraction]:
    if invoice.seed % 3 == 0:
        return 200, '{"supplier": "truncated'
    if invoice.seed % 3 == 1:
        return 500, "overloaded"
    return truthful(invoice)


def test_a_total_copied_into_another_field_is_put_right_only_where_the_arithmetic_proves_it(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    """The model copied the net into the gross: grounding takes the printed amount the
    line amounts and tax lines both confirm (evidence ``arithmetic``); the invoice whose
    own arithmetic is off by a cent keeps the model's value and goes to review, and no
    adversarial invoice is accepted."""
    server = provider(_wrong_gross)
    report, _, _ = _run(server.base_url, tmp_path)
    assert report["false_accepts"] == []
    for row in report["rows"]:
        if row["variant"] == "arithmetic_off_by_cent":
            assert row["outcome"] == "REVIEW_REQUIRED"
            assert "gross_total" in row["differing_fields"]
        else:
            assert "gross_total" not in row["differing_fields"], row["id"]
        if row["variant"] == "clean":
            assert row["outcome"] == "SUCCEEDED" and row["exact_match"], row["id"]
    assert report["fields"]["net_total"]["precision"] == 1.0


def test_the_report_counts_the_rule_ids_behind_each_review_and_each_change(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    """Each reviewed invoice names the rules that refused it, each repaired one the rule
    that changed its value, and the report counts both per rule id."""
    server = provider(_wrong_gross)
    report, _, _ = _run(server.base_url, tmp_path)
    reviewed = [r for r in report["rows"] if r["outcome"] == "REVIEW_REQUIRED"]
    assert reviewed
    for row in reviewed:
        assert row["rules"] and set(row["rules"]) <= set(RULES), row["id"]
        assert [d["rule"] for d in row["reason_details"] if "rule" in d] == row["rules"]
    off = [r for r in reviewed if r["variant"] == "arithmetic_off_by_cent"]
    assert off and all(
        any(rule.startswith("validation.") and "total" in rule for rule in r["rules"]) for r in off
    )
    assert sum(report["rule_counts"].values()) == sum(len(r["rules"]) for r in report["rows"])
    assert report["change_counts"].get("totals.copied.gross", 0) >= 1
    assert "totals.copied.gross" in render_text(report)


def test_malformed_output_and_engine_errors_are_counted_not_fatal(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    server = provider(_faulty)
    report, _, png = _run(server.base_url, tmp_path)
    outcomes = [row["outcome"] for row in report["rows"]]
    malformed = sum(1 for inv in CORPUS if inv.seed % 3 == 0)
    errors = sum(1 for inv in CORPUS if inv.seed % 3 == 1)
    assert outcomes.count("MALFORMED") == malformed
    assert outcomes.count("ENGINE_ERROR") == errors
    assert report["malformed"] == malformed and report["engine_errors"] == errors
    assert report["failed"] == malformed + errors
    assert report["output_tokens_reported"] == N - errors  # a 500 reports no usage
    assert report["micro"]["precision"] == 1.0 and report["micro"]["recall"] < 1.0
    assert png.exists()


def test_cli_writes_json_and_png(
    provider: Callable[..., Provider], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    variants = (Variant.CLEAN, Variant.HOMOGLYPH_SUPPLIER)
    server = provider(truthful, generate_corpus(4, variants=variants, max_line_items=MAX_LINES))
    out = tmp_path / "results" / "eval"
    code = main(
        [
            "--engine", "openai", "--base-url", server.base_url, "--model", "truth-model",
            "-n", "4", "--max-line-items", str(MAX_LINES), "--report", str(out),
            "--variants", "clean,homoglyph_supplier", "--max-tokens", "1000",
            "--no-schema-in-prompt",
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["invoices"] == 4 and report["model"] == "truth-model"
    assert report["micro"]["recall"] == 1.0
    assert report["confusion"]["unacceptable"]["REVIEW_REQUIRED"] == 2
    assert (out / "report.png").exists()
    printed = capsys.readouterr()
    assert "wrote" in printed.out and "false accepts: 0" in printed.out
    assert "decision accuracy vs expected_decision: 1.000" in printed.out
    assert len(printed.out.splitlines()) <= 40
    progress = [line for line in printed.err.splitlines() if line.startswith("eval: ")]
    assert len(progress) == 4 and progress[-1].startswith("eval: 4/4 · SUCCEEDED 2 REVIEW 2")
    assert report["max_tokens"] == 1000 and report["schema_in_prompt"] is False
    for request in server.requests:
        assert request["body"]["max_tokens"] <= 1000
        assert "JSON schema (" not in request["body"]["messages"][0]["content"]


def test_replay_reads_recorded_answers_again_without_an_engine(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    """``--engine replay`` answers every invoice with the answer a report recorded for
    its id: the same outcomes with no server; a report missing an invoice is an error."""
    server = provider(truthful, generate_corpus(3, variants=(Variant.CLEAN,), max_line_items=6))
    first, again = tmp_path / "first", tmp_path / "again"
    common = ["-n", "3", "--max-line-items", "6", "--variants", "clean"]
    assert main(
        ["--engine", "openai", "--base-url", server.base_url, "--model", "m",
         "--report", str(first), *common]
    ) == 0  # fmt: skip
    served = len(server.requests)
    recorded = first / "report.json"
    assert (
        main(["--engine", "replay", "--answers", str(recorded), "--report", str(again), *common])
        == 0
    )
    assert len(server.requests) == served  # nothing was asked of the provider
    before, after = (json.loads((d / "report.json").read_text()) for d in (first, again))
    assert [r["answer"] for r in after["rows"]] == [r["answer"] for r in before["rows"]]
    assert after["succeeded"] == before["succeeded"] == 3
    # Four invoices asked, three recorded: refused before anything runs.
    with pytest.raises(SystemExit, match="no answer for invoice"):
        main(["--engine", "replay", "--answers", str(recorded), "--report", str(again),
              "-n", "4", "--max-line-items", "6", "--variants", "clean"])  # fmt: skip
    # An invoice the engine failed on (no answer, its error recorded) fails again with
    # that error instead of refusing the whole replay.
    failed = json.loads(recorded.read_text())
    failed["rows"][1].update(
        answer=None, outcome="ENGINE_ERROR", error="ContextTooLong: prompt 8781 > 8192"
    )
    failed["rows"][2].update(answer=None, outcome="MALFORMED", error="cut at max_tokens")
    recorded.write_text(json.dumps(failed))
    assert (
        main(["--engine", "replay", "--answers", str(recorded), "--report", str(again), *common])
        == 0
    )
    rows = json.loads((again / "report.json").read_text())["rows"]
    assert [r["outcome"] for r in rows] == ["SUCCEEDED", "ENGINE_ERROR", "MALFORMED"]
    assert "ContextTooLong: prompt 8781 > 8192" in rows[1]["error"]
    assert "cut at max_tokens" in rows[2]["error"]


def test_summary_counts_a_delivered_wrong_result_as_false_accept() -> None:
    counts = {name: [0, 1, 1] for name in FIELDS}
    row = {
        "fields": counts,
        "fields_before_cap": counts,
        "reasons": [],
        "latency_s": 0.1,
        "expected_decision": "SUCCEEDED",
        "completion_tokens": None,
    }
    rows = [
        {**row, "id": "a", "outcome": "SUCCEEDED", "acceptable": False, "exact_match": False,
         "differing_fields": ["gross_total"], "false_accept": True, "decision_right": True},
        {**row, "id": "b", "outcome": "REVIEW_REQUIRED", "acceptable": True, "exact_match": True,
         "differing_fields": [], "false_accept": False, "decision_right": False},
    ]  # fmt: skip
    report = summarise(rows, {})
    assert report["confusion"]["unacceptable"]["SUCCEEDED"] == 1
    assert report["false_accepts"] == [
        {"id": "a", "fields": ["gross_total"], "expected": "SUCCEEDED"}
    ]
    assert report["decision_accuracy"] == 0.5
    assert report["micro"]["precision"] == 0.0
    assert report["output_tokens_mean"] is None and report["invoices_per_minute"] is None


def test_eval_corpus_mixes_clean_and_document_level_variants() -> None:
    variants = {inv.variant for inv in CORPUS}
    assert Variant.CLEAN in variants
    assert all(v.in_document or v is Variant.CLEAN for v in variants)


def _cut_in_half(invoice: GeneratedInvoice) -> tuple[int, str | Extraction]:
    text = invoice.truth.model_dump_json()
    return 200, text[: len(text) // 2]  # an answer that ran out of tokens


def test_truncated_answers_are_malformed_but_scored_before_the_cap(
    provider: Callable[..., Provider], tmp_path: Path
) -> None:
    server = provider(_cut_in_half)  # before-the-cap scoring reads contract v1 answers
    report, _, _ = _run(server.base_url, tmp_path, contract=CONTRACT_V1)
    assert {row["outcome"] for row in report["rows"]} == {"MALFORMED"}
    assert report["micro"]["recall"] == 0.0  # nothing parses, so nothing counts as extracted
    before = report["micro_before_cap"]
    # Half of a true answer: everything written is right, and part of the truth is there.
    assert before["precision"] == 1.0 and 0.0 < before["recall"] < 1.0
    # The supplier comes first in the answer, so every cut-off answer still has it.
    assert report["fields_before_cap"]["supplier.name"]["recall"] == 1.0
    assert report["false_accepts"] == [] and report["decision_accuracy"] == 0.0
