"""``fenceline generate``: generated invoices written as files, with a dataset naming them.

Each invoice (seeds ``--seed`` .. ``--seed + --count - 1``, cycling through
``--variants``) is written as a PDF with a text layer, a scan of that PDF, or its plain
text (``--as``; :mod:`benchmarks.invoices.files`), into ``--out``, and one line per
invoice goes to ``--out/dataset.jsonl``: its ``document`` (the file's name, relative to
the dataset), its truth, master data and expected decision, in the format
``fenceline eval --dataset`` reads (``docs/eval-dataset.md``). The eval then reads each
file as the worker's document stage does: the PDF's text layer on a grid, the scan by
OCR.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from benchmarks.eval.generated import record_from_generated
from benchmarks.invoices.files import SCAN_FORMATS, RenderedFile, render_pdf, render_scan
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_corpus

KINDS = ("pdf", "scan", "text")
DATASET_NAME = "dataset.jsonl"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", "-n", type=int, default=10, help="how many invoices (10)")
    p.add_argument("--seed", type=int, default=0, help="first generator seed (0)")
    p.add_argument(
        "--as", dest="kind", choices=KINDS, default="pdf",
        help="pdf: text-layer PDF; scan: the PDF rasterised (150-300 dpi, skew, blur, "
        "noise, JPEG artefacts); text: the laid-out text as a .txt file",
    )  # fmt: skip
    p.add_argument(
        "--format", dest="scan_format", choices=[f.lower() for f in SCAN_FORMATS], default=None,
        help="scan: the image format (default: drawn by seed; a multi-page scan is a TIFF)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="folder for the files and the dataset")
    p.add_argument(
        "--variants", default=Variant.CLEAN.value,
        help="comma-separated cycle of variants (default clean; see benchmarks.invoices.Variant)",
    )  # fmt: skip
    p.add_argument("--max-line-items", type=int, default=200, help="line items cap (200)")
    p.add_argument("--languages", default=None, help="only these languages (comma-separated)")
    p.add_argument("--layouts", default=None, help="only these layout families (comma-separated)")
    p.add_argument(
        "--anchor", type=date.fromisoformat, default=None,
        help="date the invoices shortly before this day (YYYY-MM-DD; default: drawn by seed)",
    )  # fmt: skip


def _names(value: str | None) -> tuple[str, ...] | None:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else None


def render_file(
    invoice: GeneratedInvoice, kind: str, scan_format: str | None = None
) -> RenderedFile:
    """``invoice`` as a file of ``kind`` (one of :data:`KINDS`)."""
    if kind == "pdf":
        return render_pdf(invoice.ocr_text)
    if kind == "scan":
        fmt = scan_format.upper() if scan_format else None
        return render_scan(invoice.ocr_text, invoice.seed, format=fmt)
    if kind == "text":
        return RenderedFile(invoice.ocr_text.encode("utf-8"), "txt", "text", 1)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def describe(file: RenderedFile) -> str:
    """How the file was made, for the dataset line's ``notes``."""
    if file.scan is None:
        return f"{file.kind}, {file.pages} page(s)"
    s = file.scan
    return (
        f"scan, {file.pages} page(s): {s.dpi} dpi, skew {s.skew:+.2f} deg, blur {s.blur} px, "
        f"noise sigma {s.noise}, JPEG quality {s.jpeg_quality}, {s.format}"
    )


def write_files(
    invoices: list[GeneratedInvoice],
    out: Path,
    kind: str,
    *,
    scan_format: str | None = None,
    progress: bool = False,
) -> Path:
    """Write every invoice as a file of ``kind`` into ``out`` and the dataset naming them;
    returns the dataset's path."""
    out.mkdir(parents=True, exist_ok=True)
    dataset = out / DATASET_NAME
    with dataset.open("w", encoding="utf-8") as fh:
        for number, invoice in enumerate(invoices, start=1):
            record = record_from_generated(invoice)
            file = render_file(invoice, kind, scan_format)
            name = f"{record.id}.{file.suffix}"
            (out / name).write_bytes(file.data)
            line = record.model_copy(
                update={
                    "ocr_text": None,
                    "document": name,
                    "family": invoice.layout,
                    "notes": f"generated seed {invoice.seed} ({invoice.language}), "
                    + describe(file),
                }
            )
            fh.write(json.dumps(line.to_json(), ensure_ascii=False) + "\n")
            if progress:
                print(f"[{number}/{len(invoices)}] {name}: {describe(file)}", file=sys.stderr)
    return dataset


def run(args: argparse.Namespace) -> int:
    if args.count < 1:
        print("generate: --count must be at least 1", file=sys.stderr)
        return 2
    try:
        variants = tuple(Variant(v.strip()) for v in args.variants.split(",") if v.strip())
        invoices = generate_corpus(
            args.count,
            seed=args.seed,
            variants=variants or (Variant.CLEAN,),
            max_line_items=args.max_line_items,
            anchor=args.anchor,
            languages=_names(args.languages),
            layouts=_names(args.layouts),
        )
    except ValueError as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    dataset = write_files(
        invoices, args.out, args.kind, scan_format=args.scan_format, progress=True
    )
    print(
        f"wrote {len(invoices)} invoices as {args.kind} (seeds {args.seed}.."
        f"{args.seed + args.count - 1}) to {args.out}; dataset {dataset} "
        f"(fenceline eval --dataset {dataset})"
    )
    return 0
