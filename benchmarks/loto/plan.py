"""What a leave-one-transformation-out run does: the adapters it trains, the invoices it
scores them on, and the commands that do both.

Every adapter continues the same starting adapter with the same recipe
(:mod:`benchmarks.adapter_train`: same training seeds, same budget); the control
excludes nothing, each other one excludes exactly one transformation ``T``. Each ``T``
is then scored on fuzzed invoices of ``T`` alone, printed from evaluation seeds
(below :data:`~benchmarks.adapter_train.TRAINING_SEED_START`, so no invoice scored was
a training invoice's generator draw), by the control, by the adapter without ``T``,
and by perfect answers (the ceiling the pipeline allows).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.adapter_train import TRAINING_SEED_END, TRAINING_SEED_START

#: The adapter folder of the run that excludes nothing.
CONTROL = "control"
#: Evaluation seeds start here by default: above every seed the docs' fuzzer figures
#: read (0-8199), far below training (1,000,000 and up).
DEFAULT_EVAL_SEED = 9000


@dataclass(frozen=True)
class LotoPlan:
    """The options of one run (``fenceline loto``), and everything derived from them."""

    transforms: tuple[str, ...]
    init_adapter: Path
    out: Path
    examples: int = 120
    time_budget_minutes: float = 12.0
    first_seed: int = 1_300_000
    fuzz_share: float = 0.6
    variant_share: float = 0.25
    max_line_items: int = 8
    max_seq_len: int = 1536
    lr: float = 2e-4
    eval_seed: int = DEFAULT_EVAL_SEED
    eval_invoices: int = 15
    concurrency: int = 4
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        from benchmarks.fuzz.transforms import BY_NAME

        unknown = [t for t in self.transforms if t not in BY_NAME]
        if unknown or not self.transforms:
            raise ValueError(f"unknown or no transformations {unknown}; known: {sorted(BY_NAME)}")
        if len(set(self.transforms)) != len(self.transforms):
            raise ValueError(f"a transformation is named twice: {list(self.transforms)}")
        if self.eval_invoices < 1:
            raise ValueError("--eval-invoices must be at least 1")
        if not 0 <= self.eval_seed or self.eval_seed + self.eval_invoices > TRAINING_SEED_START:
            raise ValueError(
                f"evaluation seeds {self.eval_seed}..{self.eval_seed + self.eval_invoices - 1} "
                f"must lie below {TRAINING_SEED_START:,} (training seeds start there)"
            )
        if not TRAINING_SEED_START <= self.first_seed < TRAINING_SEED_END - self.examples:
            raise ValueError(
                f"--first-seed must lie in {TRAINING_SEED_START:,}..{TRAINING_SEED_END:,} "
                "less --examples"
            )

    @property
    def adapters(self) -> tuple[str, ...]:
        """The adapter names, the control first: ``control``, ``without-T`` per ``T``."""
        return (CONTROL, *(without(t) for t in self.transforms))

    def adapter_dir(self, name: str) -> Path:
        return self.out / "adapters" / name

    def excluded(self, name: str) -> tuple[str, ...]:
        """The transformations adapter ``name`` never trained on."""
        if name == CONTROL:
            return ()
        t = name.removeprefix("without-")
        if name == t or t not in self.transforms:
            raise ValueError(f"no adapter {name!r} in this plan")
        return (t,)

    def train_argv(self, name: str) -> list[str]:
        """The ``python -m benchmarks.adapter_train`` command of adapter ``name``: the
        same recipe for every adapter, only ``--exclude-transform`` differs."""
        argv = [
            sys.executable, "-m", "benchmarks.adapter_train",
            "--init-adapter", str(self.init_adapter),
            "--examples", str(self.examples),
            "--first-seed", str(self.first_seed),
            "--fuzz-share", str(self.fuzz_share),
            "--variant-share", str(self.variant_share),
        ]  # fmt: skip
        for t in self.excluded(name):
            argv += ["--exclude-transform", t]
        return [
            *argv,
            "--max-line-items", str(self.max_line_items),
            "--lr", str(self.lr), "--epochs", "1", "--batch-size", "1",
            "--max-seq-len", str(self.max_seq_len),
            "--time-budget-minutes", str(self.time_budget_minutes),
            "--out", str(self.adapter_dir(name)),
        ]  # fmt: skip

    @property
    def eval_seeds(self) -> range:
        return range(self.eval_seed, self.eval_seed + self.eval_invoices)

    def eval_pairs(self, transforms: Sequence[str]) -> list[tuple[int, tuple[str, ...]]]:
        """``(seed, family)`` of every invoice scored for ``transforms``: each alone, on
        the same evaluation seeds."""
        return [(seed, (t,)) for t in transforms for seed in self.eval_seeds]

    def dataset_path(self, transform: str) -> Path:
        """The ``fenceline eval --dataset`` file of ``transform``'s invoices (the control
        and the adapter without ``transform`` score the same file)."""
        return self.out / "datasets" / f"{transform}.jsonl"

    def eval_dir(self, name: str, transform: str) -> Path:
        return self.out / "eval" / transform / name

    def eval_argv(self, name: str, transform: str) -> list[str]:
        """The live ``fenceline eval`` command scoring adapter ``name`` on ``transform``."""
        return [
            sys.executable, "-m", "benchmarks.eval", "--engine", "vllm",
            "--adapter", str(self.adapter_dir(name)),
            "--dataset", str(self.dataset_path(transform)),
            "--concurrency", str(self.concurrency), "--timeout", str(self.timeout_s),
            "--report", str(self.eval_dir(name, transform)),
        ]  # fmt: skip

    def steps(self) -> list[tuple[str, str, str | None]]:
        """The run in order, as ``(kind, adapter, transformation)``: the control trained
        first, then per transformation its adapter trained and both scored on it, so a
        run cut short has whole transformations measured."""
        out: list[tuple[str, str, str | None]] = [("train", CONTROL, None)]
        for t in self.transforms:
            out += [("train", without(t), None), ("eval", CONTROL, t), ("eval", without(t), t)]
        return out


def without(transform: str) -> str:
    """The name of the adapter that never trained on ``transform``."""
    return f"without-{transform}"
