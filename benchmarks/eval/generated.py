"""Generated invoices as dataset lines: one code path scores generated and supplied
invoices alike (docs/eval-dataset.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from benchmarks.eval.dataset import Case, EvalRecord
from benchmarks.eval.truth import MasterData, truth_from_extraction
from benchmarks.invoices.generator import GeneratedInvoice


def record_from_generated(invoice: GeneratedInvoice) -> EvalRecord:
    """A generated invoice as a dataset record.

    ``expected_decision`` is the decision a *faithful* transcription must reach
    (the generator's ``truth_decision``). The generator's ``expected_decision``
    is what its faulty ``candidate`` answer reaches instead; the two differ for
    the prompt-injection variant, where a model that ignores the injection is
    right to be accepted.
    """
    return EvalRecord(
        id=f"gen-{invoice.seed}-{invoice.variant.value}",
        ocr_text=invoice.ocr_text,
        truth=truth_from_extraction(invoice.truth),
        master_data=MasterData.of(invoice.master_data),
        expected_decision=invoice.truth_decision.value,
        today=invoice.today,
    )


def generated_cases(invoices: Iterable[GeneratedInvoice]) -> list[Case]:
    """Generated invoices as cases, tagged with how they were generated."""
    return [
        Case(
            record_from_generated(inv),
            tags={
                "seed": inv.seed,
                "variant": inv.variant.value,
                "language": inv.language,
                "layout": inv.layout,
            },
        )
        for inv in invoices
    ]


def export_dataset(invoices: Iterable[GeneratedInvoice], path: Path) -> int:
    """Write generated invoices as a dataset file; returns how many lines were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for invoice in invoices:
            fh.write(json.dumps(record_from_generated(invoice).to_json(), ensure_ascii=False))
            fh.write("\n")
            n += 1
    return n
