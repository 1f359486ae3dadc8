"""``fenceline`` sub-commands that belong to the benchmarks: ``demo``, ``eval``, ``fuzz``,
``generate``, ``bench``, ``capacity``, ``erp-receiver``, ``adapter train``, ``corpus einvoices``,
``loto``.

The product never imports :mod:`benchmarks`; this package adds its commands as a
plugin instead: ``pyproject.toml`` names :func:`register` in the
``fenceline.commands`` entry-point group, and :func:`cluster.cli.entry.subcommands`
loads it from the installed metadata (``make venv``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

from cluster.cli.base import CommandTable
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def _anchor(text: str) -> date | str:
    if text == "today":
        return text
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no date: give YYYY-MM-DD or 'today'"
        ) from None


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--invoices", type=int, help="how many invoices (default 8)")
    p.add_argument("--seed", type=int, help="first generator seed (default 2026; < 1_000_000)")
    p.add_argument("--max-line-items", type=int, help="line items per invoice (default 3, <= 8)")
    p.add_argument("--drivers", type=int, help="task drivers (default 2)")
    p.add_argument(
        "--timeout", type=float, dest="timeout_s", help="seconds for every job to settle (1200)"
    )
    p.add_argument("--out", type=Path, dest="out_dir", help="report folder (results/demo)")
    p.add_argument(
        "--anchor",
        type=_anchor,
        default=None,
        help="date the invoices shortly before this day, YYYY-MM-DD or 'today' "
        "(default: the fixed day the recorded outcome was measured on, 2026-12-04)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        default=None,
        help="keep the cluster and the review console up after the report (Ctrl-C ends it), "
        "with the REVIEW_REQUIRED jobs waiting in the console",
    )


@command("demo", "run the main job end to end on the embedded default", _demo_args)
def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from benchmarks.demo.run import options_from, run_demo

    opts = options_from(
        invoices=args.invoices,
        seed=args.seed,
        max_line_items=args.max_line_items,
        drivers=args.drivers,
        timeout_s=args.timeout_s,
        out_dir=args.out_dir,
        keep=args.keep,
    )
    if args.anchor is not None:  # "today" clears the fixed day; None keeps the default
        opts = replace(opts, anchor=None if args.anchor == "today" else args.anchor)
    return run_demo(opts, settings)


@TABLE.passthrough("eval", "extraction accuracy over generated invoices or a dataset")
def _eval(argv: list[str], _settings: Settings) -> int:
    from benchmarks.eval.run import main

    return main(argv)


@TABLE.passthrough("fuzz", "metamorphic layout fuzzer: transformed invoices, false accepts")
def _fuzz(argv: list[str], _settings: Settings) -> int:
    from benchmarks.fuzz.command import main

    return main(argv)


def _generate_args(p: argparse.ArgumentParser) -> None:
    from benchmarks.generate import add_arguments

    add_arguments(p)


@command(
    "generate",
    "write generated invoices as PDFs or scans, with a dataset for fenceline eval --dataset",
    _generate_args,
)
def _generate(args: argparse.Namespace, _settings: Settings) -> int:
    from benchmarks.generate import run

    return run(args)


@TABLE.passthrough("erp-receiver", "run the reference ERP webhook receiver")
def _erp_receiver(argv: list[str], settings: Settings) -> int:
    """The receiver's ``--database-url`` defaults to the CLI's (given or from the environment)."""
    from benchmarks.erp_receiver import main

    if "database_url" in settings.model_fields_set:
        argv = ["--database-url", settings.database_url, *argv]
    return main(argv)


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario name (benchmarks/scenarios/) or YAML path")
    p.add_argument("--out", type=Path, default=None, help="results folder")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument(
        "--engine", choices=["fake", "vllm-cpu", "vllm-gpu"], default=None,
        help="override the scenario's engine kind",
    )  # fmt: skip
    p.add_argument("--no-baselines", action="store_true", help="main run only")
    burst = p.add_argument_group("autoscale (`fenceline bench autoscale`, docs/benchmarks.md)")
    burst.add_argument("--burst", type=int, default=120, help="jobs in the burst (120)")
    burst.add_argument("--quiet-jobs", type=int, default=4, help="jobs before the burst (4)")
    burst.add_argument("--service-s", type=float, default=0.5, help="provider s per call (0.5)")
    burst.add_argument("--concurrency", type=int, default=2, help="leases per driver (2)")
    burst.add_argument("--min-drivers", type=int, default=1)
    burst.add_argument("--max-drivers", type=int, default=8)
    burst.add_argument("--up-age", type=float, default=2.0, help="scale-up age, s (2)")
    burst.add_argument("--idle", type=float, default=3.0, help="drained s before scale-down (3)")
    burst.add_argument("--cooldown", type=float, default=1.0, help="s between changes (1)")
    chaos = p.add_argument_group("chaos (`fenceline bench chaos`, docs/chaos.md)")
    chaos.add_argument("--invoices", type=int, default=200, help="invoices to submit (200)")
    chaos.add_argument("--seed", type=int, default=17, help="seed of the fault schedule (17)")
    chaos.add_argument("--rounds", type=int, default=1, help="times each fault kind is done (1)")
    chaos.add_argument(
        "--rabbitmq-restart", action="store_true",
        help="also restart the real RabbitMQ (rabbitmqctl stop_app/start_app; shared broker!)",
    )  # fmt: skip
    chaos.add_argument(
        "--private-postgres", action="store_true",
        help="run the whole database on a PostgreSQL server of the run's own (pgserver's "
        "binaries, a temporary data folder, a free loopback port)",
    )  # fmt: skip
    chaos.add_argument(
        "--pg-restart", action="store_true",
        help="also stop and start the PostgreSQL server once: the private one (implies "
        "--private-postgres), unless --pg-version or the pg commands name an outside server",
    )  # fmt: skip
    chaos.add_argument(
        "--pg-version", default="",
        help="outside server (shared!): {version} in the pg commands (e.g. 14)",
    )  # fmt: skip
    chaos.add_argument(
        "--pg-stop-command", default="",
        help="outside server (shared!); default: pg_ctlcluster {version} main stop -m fast",
    )  # fmt: skip
    chaos.add_argument(
        "--pg-start-command", default="",
        help="outside server (shared!); default: pg_ctlcluster {version} main start",
    )  # fmt: skip
    chaos.add_argument(
        "--engine-url", default="",
        help="OpenAI-compatible engine for the drivers instead of the fake (a vLLM server's "
        "http://HOST:PORT/v1); the provider faults are then left out",
    )  # fmt: skip
    chaos.add_argument("--engine-model", default="", help="model name at --engine-url")
    chaos.add_argument(
        "--stack", choices=["harness", "serve"], default="harness",
        help="harness: uvicorn intake + actors the harness creates (default, CI); serve: the "
        "Serve intake ingress and the runtime supervisor app, as `fenceline up` deploys them; "
        "with --engine vllm-cpu the drivers call the inference app on vLLM",
    )  # fmt: skip
    chaos.add_argument(
        "--kinds", default="", help="comma-separated fault kinds (default: every kind that applies)"
    )


@command("bench", "run a pipeline benchmark scenario (python -m benchmarks)", _bench_args)
def _bench(args: argparse.Namespace, _settings: Settings) -> int:
    from benchmarks.__main__ import main

    if args.scenario == "autoscale":
        from benchmarks.load.autoscale_bench import main as autoscale

        return autoscale(args)
    if args.scenario == "chaos":
        from benchmarks.chaos.cli import run_from_args

        return run_from_args(args)
    argv = [args.scenario, *(["--out", str(args.out)] if args.out else [])]
    argv += ["--engine", args.engine] if args.engine else []
    argv += ["--no-baselines"] if args.no_baselines else []
    return main([*argv, *(["--quiet"] if args.quiet else [])])


def _capacity_args(p: argparse.ArgumentParser) -> None:
    from benchmarks.capacity import add_arguments

    add_arguments(p)


@command("capacity", "capacity model: attempt/job capacity and drain time", _capacity_args)
def _capacity(args: argparse.Namespace, _settings: Settings) -> int:
    from benchmarks.capacity import inputs_from, predict, render

    inputs = inputs_from(args)
    print(render(inputs, predict(inputs)))
    return 0


def _adapter_train_args(p: argparse.ArgumentParser) -> None:
    from benchmarks.adapter_train import add_arguments

    add_arguments(p)


@command(
    "adapter train",
    "train the pools' LoRA adapter on generated invoices (make adapter)",
    _adapter_train_args,
)
def _adapter_train(args: argparse.Namespace, _settings: Settings) -> int:
    import shlex

    from benchmarks.adapter_train import run

    return run(args, "fenceline " + shlex.join(sys.argv[1:]))


def _corpus_einvoices_args(p: argparse.ArgumentParser) -> None:
    from benchmarks.corpus.command import add_arguments

    add_arguments(p)


@command(
    "corpus einvoices",
    "the public ZUGFeRD/Factur-X corpus as an eval dataset (docs/real-invoices.md)",
    _corpus_einvoices_args,
)
def _corpus_einvoices(args: argparse.Namespace, _settings: Settings) -> int:
    from benchmarks.corpus.command import run

    return run(args)


@TABLE.passthrough("loto", "leave-one-transformation-out: adapters trained without one layout")
def _loto(argv: list[str], _settings: Settings) -> int:
    from benchmarks.loto.command import main

    return main(argv)
