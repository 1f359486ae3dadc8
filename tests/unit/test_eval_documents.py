"""``fenceline eval --dataset``: a line may name a file (``document``) instead of its
text (issue 43): a PDF, scan or photo read as the worker's document stage reads it, so
a user measures the system on the files they have. Files drawn here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.generated import record_from_generated
from benchmarks.eval.run import main as eval_main
from benchmarks.invoices.generator import generate_invoice
from pipeline.documents import read_pdf_text
from tests.support.pdfs import text_pdf
from tests.support.scans import encode, render_text

#: An English clean invoice whose text layer reads back whole (Courier is WinAnsi).
INVOICE = generate_invoice(9, languages=("en",), max_line_items=3)


def _line(document: str | None, *, text: bool = False) -> dict[str, object]:
    line = record_from_generated(INVOICE).to_json()
    if not text:
        del line["ocr_text"]
    if document is not None:
        line["document"] = document
    return line


def _write(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return path


def test_a_pdf_line_is_read_as_the_worker_reads_it(tmp_path: Path) -> None:
    pdf = text_pdf(INVOICE.ocr_text)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "invoice.pdf").write_bytes(pdf)
    dataset = load_dataset(_write(tmp_path / "d.jsonl", [_line("files/invoice.pdf")]))
    assert dataset.skipped == []
    (case,) = dataset.cases
    layer = "\f".join(p.laid_out().text for p in read_pdf_text(pdf, max_pages=10).pages)
    assert case.record.text == layer
    assert case.tags == {"media_type": "application/pdf", "ocr_pages": 0}


def test_an_oracle_run_over_a_pdf_decides_as_its_text(tmp_path: Path) -> None:
    (tmp_path / "invoice.pdf").write_bytes(text_pdf(INVOICE.ocr_text))
    dataset = _write(tmp_path / "d.jsonl", [_line("invoice.pdf")])
    assert (
        eval_main(["--engine", "oracle", "--dataset", str(dataset), "--out", str(tmp_path / "r")])
        == 0
    )
    (row,) = json.loads((tmp_path / "r" / "report.json").read_text())["rows"]
    assert (row["outcome"], row["exact_match"], row["media_type"]) == (
        "SUCCEEDED",
        True,
        "application/pdf",
    )


@pytest.mark.ocr
def test_a_scan_line_is_held_to_the_ocr_proof_as_the_worker_holds_it(tmp_path: Path) -> None:
    """Each value OCR read is proven by its words' confidence or named for review;
    the document as a whole is not (the eval carries the confidences)."""
    (tmp_path / "scan.png").write_bytes(encode(render_text(INVOICE.ocr_text)))
    dataset = _write(tmp_path / "d.jsonl", [_line("scan.png")])
    assert (
        eval_main(["--engine", "oracle", "--dataset", str(dataset), "--out", str(tmp_path / "r")])
        == 0
    )
    (row,) = json.loads((tmp_path / "r" / "report.json").read_text())["rows"]
    assert row["ocr_pages"] == 1
    assert row["outcome"] == "SUCCEEDED" or "ocr_unverified" in row["reasons"]
    assert not row["false_accept"]
    ocr = [d["field"] for d in row["reason_details"] if d["code"] == "ocr_unverified"]
    assert "document" not in ocr


def test_a_line_with_both_or_neither_is_refused_and_a_missing_file_named(tmp_path: Path) -> None:
    lines = [_line("a.pdf", text=True), _line(None), _line("missing.pdf")]
    for n, line in enumerate(lines):
        line["id"] = f"case-{n}"
    dataset = load_dataset(_write(tmp_path / "d.jsonl", lines))
    assert dataset.cases == []
    errors = [s["error"] for s in dataset.skipped]
    assert errors[0] == "give 'ocr_text' or 'document', not both"
    assert errors[1] == "missing required key 'ocr_text' (or a 'document' file)"
    assert errors[2].startswith("document 'missing.pdf':")
