"""``fenceline bench chaos``: options to a run, the summary to the terminal, the files to --out."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from benchmarks.chaos.report import summarise
from benchmarks.chaos.run import ChaosOptions, run_chaos
from benchmarks.chaos.schedule import FaultKind, kinds_for
from benchmarks.chaos.serve_stack import ServeOptions
from benchmarks.chaos.stack import StackConfig

#: ``pg_restart`` on a Debian/Ubuntu cluster (``{version}``: the server's major version).
PG_STOP = "pg_ctlcluster {version} main stop -m fast"
PG_START = "pg_ctlcluster {version} main start"

#: ``--stack serve --engine vllm-cpu``: an answer of the bundled model on 2 CPU cores
#: takes minutes when a few share the engine (docs/chaos.md), so leases, timeouts and
#: the gaps between faults are minutes too, and at most 4 attempts run at once.
VLLM_STACK = {
    "concurrency": 2,
    "max_in_flight": 4,
    "lease_s": 30.0,
    "attempt_timeout_s": 600.0,
    # A greedy answer that fails validation fails the same way again (make demo runs 1).
    "max_attempts": 3,
}
VLLM_KINDS = (
    FaultKind.DRIVER_KILL_MID_CALL,
    FaultKind.PG_TERMINATE,
    FaultKind.AMQP_CUT,
    FaultKind.ERP_DOWN_THEN_500,
)


def options_from(args: argparse.Namespace) -> ChaosOptions:
    engine_url = getattr(args, "engine_url", "") or ""
    pg_restart = bool(getattr(args, "pg_restart", False))
    version = getattr(args, "pg_version", "") or ""
    serve = None
    if getattr(args, "stack", "harness") == "serve":
        vllm = (getattr(args, "engine", None) or "").startswith("vllm")
        serve = ServeOptions(engine="vllm" if vllm else "fake")
    on_vllm = serve is not None and serve.engine == "vllm"
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
        **(VLLM_STACK if on_vllm else {}),  # type: ignore[arg-type]
    )
    kinds = kinds_for(
        rabbitmq_restart=args.rabbitmq_restart,
        pg_restart=pg_restart,
        fake_provider=not engine_url and not on_vllm,
    )
    if on_vllm:
        kinds = VLLM_KINDS
    if getattr(args, "kinds", ""):
        kinds = tuple(FaultKind(k.strip()) for k in args.kinds.split(",") if k.strip())
    return ChaosOptions(
        invoices=args.invoices,
        seed=args.seed,
        rounds=args.rounds,
        kinds=kinds,
        stack=stack,
        serve=serve,
        **({"start_s": 30.0, "gap_s": 45.0} if on_vllm else {}),  # type: ignore[arg-type]
        # Larger runs drain a larger backlog after the last fault; answers on vLLM take minutes.
        drain_timeout_s=1800.0 if on_vllm else max(180.0, args.invoices * 0.3),
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
