"""One fuzzed invoice: a generated invoice's facts, printed under a family of
transformations, with its truth; and the invoice as a ``fenceline eval --dataset`` line.

Deterministic in ``(seed, family, max_line_items)``: the generator is seeded, and the
fuzzer's own draws come from a stream named after the seed and the family.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from benchmarks.eval.dataset import EvalRecord
from benchmarks.eval.truth import MasterData, truth_from_extraction
from benchmarks.fuzz.facts import facts_of
from benchmarks.fuzz.render import render
from benchmarks.fuzz.transforms import GENERATOR, apply_family
from benchmarks.fuzz.truth import located_truth, truth_of
from benchmarks.invoices import generate_invoice
from pipeline.invoice import Extraction, TenantMasterData

#: Line items per invoice unless asked otherwise: enough for tables to mean something,
#: few enough that thousands of invoices run in minutes on two cores.
DEFAULT_MAX_LINE_ITEMS = 8


@dataclass(frozen=True)
class FuzzCase:
    seed: int
    family: tuple[str, ...]
    text: str
    truth: Extraction
    master_data: TenantMasterData
    today: date
    language: str

    @property
    def name(self) -> str:
        """The family as one string, transformation names joined by "+"."""
        return "+".join(self.family)

    def record(self) -> dict[str, Any]:
        """The ``fenceline eval --dataset`` line (docs/eval-dataset.md) plus ``family``."""
        record = EvalRecord(
            id=f"fuzz-{self.seed}-{self.name}",
            ocr_text=self.text,
            truth=truth_from_extraction(self.truth),
            master_data=MasterData.of(self.master_data),
            expected_decision="SUCCEEDED",
            today=self.today,
        )
        return {**record.to_json(), "family": self.name}


def fuzz_case(
    seed: int, family: Sequence[str], *, max_line_items: int = DEFAULT_MAX_LINE_ITEMS
) -> FuzzCase:
    """The generated invoice of ``seed`` printed under ``family`` (``("generator",)``: its
    own text, the truth found again in it; ``("plain",)``: the fuzzer's plain print).

    Raises:
        ValueError: an unknown transformation, or two that set the same choice.
    """
    invoice = generate_invoice(seed, max_line_items=max_line_items)
    family = tuple(family)
    if family == (GENERATOR,):
        return FuzzCase(
            seed, family, invoice.ocr_text, located_truth(invoice), invoice.master_data,
            invoice.today, invoice.language,
        )  # fmt: skip
    rng = random.Random(f"fuzz:{seed}:{'+'.join(family)}")
    facts, layout = apply_family(facts_of(invoice), family, rng)
    printed = render(facts, layout, rng)
    return FuzzCase(
        seed, family, printed.text, truth_of(facts, printed), facts.master_data, facts.today,
        invoice.language,
    )  # fmt: skip
