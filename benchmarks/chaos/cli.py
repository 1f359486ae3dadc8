"""``fenceline bench chaos``: options to a run, the summary to the terminal, the files to --out."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from benchmarks.chaos.report import summarise
from benchmarks.chaos.run import ChaosOptions, run_chaos
from benchmarks.chaos.schedule import ALL_KINDS, CI_KINDS


def options_from(args: argparse.Namespace) -> ChaosOptions:
    return ChaosOptions(
        invoices=args.invoices,
        seed=args.seed,
        rounds=args.rounds,
        kinds=ALL_KINDS if args.rabbitmq_restart else CI_KINDS,
        # Larger runs drain a larger backlog after the last fault.
        drain_timeout_s=max(180.0, args.invoices * 0.3),
        out_dir=args.out or Path("results") / "chaos",
        progress=not args.quiet,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Exit status 0 only if the run drained and every invariant held."""
    opts = options_from(args)
    result = asyncio.run(run_chaos(opts))
    print(summarise(result.as_dict(), result.oracle))
    print(f"results in {opts.out_dir}/ (chaos.json, chaos_timeline.png, chaos_summary.txt)")
    return 0 if result.ok else 1
