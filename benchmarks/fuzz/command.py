"""``fenceline fuzz``: the metamorphic layout fuzzer from the command line (docs/fuzzer.md).

Exit status 0 when no answer was a false accept, 1 when any was (the property
SUCCEEDED ⇒ every field equals the truth failed), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from benchmarks.fuzz.answers import MODES
from benchmarks.fuzz.campaign import DEFAULT_POOL, families, run
from benchmarks.fuzz.cases import DEFAULT_MAX_LINE_ITEMS, fuzz_case
from benchmarks.fuzz.report import build, export, summary, write
from benchmarks.fuzz.transforms import FAMILY_NAMES, GENERATOR, PLAIN, compatible


def seed_list(text: str) -> list[int]:
    """``0-999`` (inclusive), ``5`` or ``1,4,9-12``."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give seeds as 0-999 or 1,4,9-12") from None
    return out


def family_list(text: str) -> list[tuple[str, ...]]:
    """Comma-separated families, each transformation names joined by "+"."""
    pool = [tuple(part.strip().split("+")) for part in text.split(",") if part.strip()]
    for family in pool:
        unknown = [n for n in family if n not in FAMILY_NAMES]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown transformation {', '.join(unknown)}; one of {', '.join(FAMILY_NAMES)}"
            )
        if GENERATOR in family and len(family) > 1:
            raise argparse.ArgumentTypeError("'generator' (the untouched text) stands alone")
        if not compatible([n for n in family if n not in (PLAIN, GENERATOR)]):
            raise argparse.ArgumentTypeError(f"{'+'.join(family)}: two of these set one choice")
    return pool


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fenceline fuzz", description=__doc__)
    p.add_argument("--seeds", type=seed_list, default=seed_list("0-99"), help="0-99")
    p.add_argument("--mode", choices=MODES, default="perfect")
    p.add_argument(
        "--transform", type=family_list, default=list(DEFAULT_POOL),
        help="families to cycle through, comma-separated, names joined by '+' "
        f"(default: each alone); names: {', '.join(FAMILY_NAMES)}",
    )  # fmt: skip
    p.add_argument("--per-seed", type=int, default=1, help="families per seed (1)")
    p.add_argument("--combine", type=int, default=0,
                   help="compatible transformations added at random to each (0)")  # fmt: skip
    p.add_argument("-k", type=int, default=3, help="decoys per field at most (3)")
    p.add_argument("--max-line-items", type=int, default=DEFAULT_MAX_LINE_ITEMS)
    p.add_argument("--out", type=Path, default=Path("results/fuzz"), help="report folder")
    p.add_argument("--export", type=Path, help="also write the invoices as an eval dataset")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    pairs = list(families(args.seeds, args.transform, per_seed=args.per_seed,
                          combine=args.combine))  # fmt: skip
    if args.export:
        n = export(
            (fuzz_case(s, f, max_line_items=args.max_line_items).record() for s, f in pairs),
            args.export,
        )
        print(f"wrote {n} invoices to {args.export}", file=sys.stderr)
    started = time.monotonic()
    trials = run(pairs, args.mode, k=args.k, max_line_items=args.max_line_items,
                 progress=not args.quiet)  # fmt: skip
    seeds = f"{min(args.seeds)}-{max(args.seeds)}" if args.seeds else ""
    report = build(
        trials,
        mode=args.mode,
        seeds=seeds,
        k=args.k if args.mode == "decoy" else None,
        max_line_items=args.max_line_items,
        wall_s=round(time.monotonic() - started, 1),
        command="fenceline fuzz " + shlex.join(argv if argv is not None else sys.argv[1:]),
    )
    json_path, _ = write(report, args.out, f"fuzz-{args.mode}-{seeds}")
    print(summary(report))
    print(f"report: {json_path}", file=sys.stderr)
    return 1 if report["overall"]["false_accepts"] else 0
