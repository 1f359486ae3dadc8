"""``fenceline bench chaos``: options to a run, the summary to the terminal, the files to --out."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from benchmarks.chaos.report import summarise
from benchmarks.chaos.run import ChaosOptions, run_chaos
from benchmarks.chaos.schedule import kinds_for
from benchmarks.chaos.stack import StackConfig

#: ``pg_restart`` on a Debian/Ubuntu cluster (``{version}``: the server's major version).
PG_STOP = "pg_ctlcluster {version} main stop -m fast"
PG_START = "pg_ctlcluster {version} main start"


def options_from(args: argparse.Namespace) -> ChaosOptions:
    engine_url = getattr(args, "engine_url", "") or ""
    pg_restart = bool(getattr(args, "pg_restart", False))
    version = getattr(args, "pg_version", "") or ""
    stop = getattr(args, "pg_stop_command", "") or ""
    start = getattr(args, "pg_start_command", "") or ""
    # An outside server is restarted only when named (a version or commands); otherwise
    # --pg-restart restarts a private server, never the shared one.
    outside = pg_restart and bool(version or stop or start)
    private = bool(getattr(args, "private_postgres", False)) or (pg_restart and not outside)
    stack = StackConfig(
        engine_url=engine_url,
        engine_model=getattr(args, "engine_model", "") or "",
        pg_stop_command=(stop or PG_STOP).format(version=version) if outside else "",
        pg_start_command=(start or PG_START).format(version=version) if outside else "",
        private_postgres=private,
    )
    return ChaosOptions(
        invoices=args.invoices,
        seed=args.seed,
        rounds=args.rounds,
        kinds=kinds_for(
            rabbitmq_restart=args.rabbitmq_restart,
            pg_restart=pg_restart,
            fake_provider=not engine_url,
        ),
        stack=stack,
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
