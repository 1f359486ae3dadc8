"""The long-invoice set of docs/extraction.md: clean invoices with 10–40 line items.

Seeds 6000–6008 (disjoint from training, eval and demo seeds); six of the nine
span two pages. Writes the eval dataset format (docs/eval-dataset.md)::

    python -m benchmarks.eval.long_invoices long.jsonl
    fenceline eval --engine vllm --pool long --dataset long.jsonl --concurrency 3 --timeout 3000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.eval.generated import export_dataset
from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice

FIRST_SEED = 6000
ITEM_COUNTS = (10, 10, 12, 12, 16, 16, 24, 24, 40)


def long_invoices() -> list[GeneratedInvoice]:
    """The set, deterministic: one invoice per entry of :data:`ITEM_COUNTS`."""
    return [generate_invoice(FIRST_SEED + i, line_items=n) for i, n in enumerate(ITEM_COUNTS)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="JSONL file to write")
    args = parser.parse_args(argv)
    invoices = long_invoices()
    for inv in invoices:
        pages = inv.ocr_text.count("\f") + 1
        print(f"seed {inv.seed}: {len(inv.truth.line_items)} items, {pages} page(s)")
    print(f"wrote {export_dataset(invoices, args.out)} invoices to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
