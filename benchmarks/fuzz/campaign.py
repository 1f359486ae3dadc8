"""A fuzzing run: which invoices, which answers, and each answer judged.

Judging uses the comparison ``fenceline eval`` scores with
(:func:`benchmarks.eval.scoring.truth_values` / :func:`~benchmarks.eval.scoring.extraction_values`),
so a false accept here is one there: the pipeline decided SUCCEEDED while a field
differs from the truth. The property the fuzzer tests is that this never happens.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from benchmarks.eval.scoring import FIELDS, extraction_values, truth_values
from benchmarks.eval.truth import truth_from_extraction
from benchmarks.fuzz.answers import ITEM_DESCRIPTION, decoys, perfect
from benchmarks.fuzz.cases import DEFAULT_MAX_LINE_ITEMS, FuzzCase, fuzz_case
from benchmarks.fuzz.transforms import FAMILY_NAMES, TRANSFORMS, draw_family
from pipeline.errors import MalformedOutput
from pipeline.invoice import SCHEMA_V1
from pipeline.worker import interpret

#: The families a run cycles through by default: each transformation alone.
#: The scored field each decoyed answer key fills.
DECOY_TARGETS = {
    "supplier": "supplier.name", "vat_id": "supplier.vat_id", "number": "invoice_number",
    "issue_date": "issue_date",
    "due_date": "due_date", "currency": "currency", "iban": "iban", "net": "net_total",
    "tax": "tax_total", "gross": "gross_total", ITEM_DESCRIPTION: "line_items[].description",
}  # fmt: skip
_ROW_INDEX = re.compile(r"\[\d+\]")
DEFAULT_POOL: tuple[tuple[str, ...], ...] = tuple((t.name,) for t in TRANSFORMS)


@dataclass(frozen=True)
class Trial:
    """One answer for one fuzzed invoice, judged."""

    seed: int
    family: str
    mode: str
    decision: str  # SUCCEEDED, REVIEW_REQUIRED or MALFORMED
    #: ``code@field`` of each review reason, row indices folded (``line_items[].quantity``).
    reasons: tuple[str, ...]
    #: Fields whose value differs from the truth, with both sides as compared.
    wrong: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    decoy_field: str | None = None
    decoy_value: object = None
    #: The rule id of each review reason that names one, and of each value grounding changed.
    rules: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()

    @property
    def false_accept(self) -> bool:
        return self.decision == "SUCCEEDED" and bool(self.wrong)

    @property
    def decoy_taken(self) -> bool:
        """A false accept of the very value the decoy wrote (not of another field)."""
        target = DECOY_TARGETS.get(self.decoy_field or "")
        return self.false_accept and target in self.wrong

    @property
    def transformations(self) -> list[str]:
        return self.family.split("+")


def judge(case: FuzzCase, answer: str, mode: str, decoy: tuple[str, object] | None = None) -> Trial:
    """Interpret ``answer`` as a job would and compare its values with the truth."""
    truth = truth_values(truth_from_extraction(case.truth), schema_version=SCHEMA_V1)
    extra = {"decoy_field": decoy[0], "decoy_value": decoy[1]} if decoy else {}
    try:
        result = interpret(answer, case.text, case.master_data, today=case.today)
    except MalformedOutput as exc:
        return Trial(case.seed, case.name, mode, "MALFORMED", (f"malformed@{exc}"[:80],), **extra)  # type: ignore[arg-type]
    got = extraction_values(result.extraction)
    wrong = {
        name: {"truth": sorted(truth[name].elements()), "got": sorted(got[name].elements())}
        for name in FIELDS
        if got[name] != truth[name]
    }
    reasons = tuple(
        f"{r.code.value}@{_ROW_INDEX.sub('[]', r.field)}" for r in result.report.reasons
    )
    return Trial(
        case.seed,
        case.name,
        mode,
        result.report.decision.value,
        reasons,
        wrong,
        rules=tuple(r.rule for r in result.report.reasons if r.rule is not None),
        changes=tuple(c.rule for c in result.changes),
        **extra,  # type: ignore[arg-type]
    )


def families(
    seeds: Sequence[int],
    pool: Sequence[tuple[str, ...]] = DEFAULT_POOL,
    *,
    per_seed: int = 1,
    combine: int = 0,
) -> Iterator[tuple[int, tuple[str, ...]]]:
    """``(seed, family)`` pairs: each seed takes ``per_seed`` families of ``pool`` in turn,
    each with up to ``combine`` compatible transformations added at random."""
    for seed in seeds:
        for j in range(per_seed):
            family = pool[(seed * per_seed + j) % len(pool)]
            if combine and len(family) == 1 and family[0] in FAMILY_NAMES[2:]:
                family = draw_family(random.Random(f"family:{seed}:{j}"), family[0], combine)
            yield seed, family


def run(
    pairs: Sequence[tuple[int, tuple[str, ...]]],
    mode: str,
    *,
    k: int = 3,
    max_line_items: int = DEFAULT_MAX_LINE_ITEMS,
    progress: bool = True,
) -> list[Trial]:
    """Judge every pair's invoice with the ``mode``'s answers (one perfect answer, or up to
    ``k`` decoys per field); a progress line on stderr every two seconds."""
    trials: list[Trial] = []
    started = last = time.monotonic()
    for n, (seed, family) in enumerate(pairs, start=1):
        case = fuzz_case(seed, family, max_line_items=max_line_items)
        if mode == "perfect":
            trials.append(judge(case, perfect(case), mode))
        else:
            trials += [judge(case, d.answer, mode, (d.field, d.value)) for d in decoys(case, k)]
        now = time.monotonic()
        if progress and (now - last > 2 or n == len(pairs)):
            last = now
            accepted = sum(t.decision == "SUCCEEDED" for t in trials)
            wrong = sum(t.false_accept for t in trials)
            print(
                f"\r{n}/{len(pairs)} invoices, {len(trials)} answers: {accepted} accepted, "
                f"{wrong} false accepts, {now - started:.0f} s",
                end="\n" if n == len(pairs) else "",
                file=sys.stderr,
                flush=True,
            )
    return trials
