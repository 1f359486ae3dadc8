"""``fenceline loto``: leave-one-transformation-out for the pools' adapter (docs/fuzzer.md).

For each transformation ``T`` given, continue the starting adapter with ``T`` kept out
of training, and once with nothing kept out (the control); score the control and each
adapter on fuzzed invoices of ``T`` alone, live through vLLM (``fenceline eval
--engine vllm --adapter``), and score perfect answers on the same invoices (the
ceiling). Reports ``OUT/report/loto-T.json`` and ``.md`` per ``T`` and
``OUT/report/loto.md`` for all.

An adapter folder that already holds a run of the same recipe (its ``manifest.json``:
same starting weights, same options but ``--out``) is reused, not trained again;
``--plan`` prints the commands and exits. Training and evaluation run as child
processes of this one (one vLLM engine each, freed when it ends), at its priority.

Exit status: 0 when every live column was measured without a false accept, 1 when
any false accept was seen, 2 for a usage error, 3 when a child command failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fuzz.campaign import run as judge_pairs
from benchmarks.fuzz.cases import fuzz_case
from benchmarks.fuzz.report import export
from benchmarks.fuzz.transforms import BY_NAME
from benchmarks.loto.plan import CONTROL, DEFAULT_EVAL_SEED, LotoPlan
from benchmarks.loto.report import compare, examples_of, markdown, write

#: Options that name where weights are, not how they are trained.
_PATH_OPTIONS = ("--out", "--init-adapter")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fenceline loto", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--transform", action="append", required=True, metavar="NAME", choices=sorted(BY_NAME),
        help="a transformation to leave out (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--init-adapter", type=Path, required=True,
        help="the adapter every run continues (one that never saw a fuzzed layout)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("results/loto"), help="run folder")
    p.add_argument("--examples", type=int, default=120, help="training invoices per adapter")
    p.add_argument("--time-budget-minutes", type=float, default=12.0, help="per adapter")
    p.add_argument("--first-seed", type=int, default=1_300_000, help="first training seed")
    p.add_argument("--fuzz-share", type=float, default=0.6)
    p.add_argument("--variant-share", type=float, default=0.25)
    p.add_argument("--max-line-items", type=int, default=8)
    p.add_argument("--max-seq-len", type=int, default=1536)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--eval-seed", type=int, default=DEFAULT_EVAL_SEED,
                   help="first evaluation seed (below training's)")  # fmt: skip
    p.add_argument("--eval-invoices", type=int, default=15, help="invoices per transformation")
    p.add_argument("--concurrency", type=int, default=4, help="live requests in flight")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per live request")
    p.add_argument("--plan", action="store_true", help="print the commands and exit")
    return p


def plan_from(args: argparse.Namespace) -> LotoPlan:
    return LotoPlan(
        transforms=tuple(args.transform), init_adapter=args.init_adapter, out=args.out,
        examples=args.examples, time_budget_minutes=args.time_budget_minutes,
        first_seed=args.first_seed, fuzz_share=args.fuzz_share,
        variant_share=args.variant_share, max_line_items=args.max_line_items,
        max_seq_len=args.max_seq_len, lr=args.lr, eval_seed=args.eval_seed,
        eval_invoices=args.eval_invoices, concurrency=args.concurrency, timeout_s=args.timeout,
    )  # fmt: skip


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recipe_options(argv: list[str]) -> dict[str, Any] | None:
    """A training command's options as parsed, less the folders (``--out``,
    ``--init-adapter``): what must match for an existing adapter to stand for a planned
    one. None for a command that is no ``benchmarks.adapter_train`` run."""
    from benchmarks.adapter_train import add_arguments

    try:
        start = argv.index("benchmarks.adapter_train") + 1
    except ValueError:
        return None
    p = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    add_arguments(p)
    try:
        options = vars(p.parse_args(argv[start:]))
    except (argparse.ArgumentError, SystemExit):
        return None
    for name in _PATH_OPTIONS:
        options.pop(name.removeprefix("--").replace("-", "_"), None)
    return options


def reusable(plan: LotoPlan, name: str) -> bool:
    """Whether adapter ``name``'s folder already holds a run of the planned recipe."""
    folder = plan.adapter_dir(name)
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if not (folder / "adapter_model.safetensors").is_file():
        return False
    init = (manifest.get("init_adapter") or {}).get("sha256")
    recorded = recipe_options(shlex.split(manifest.get("command", "")))
    planned = recipe_options(plan.train_argv(name))
    same_start = init == _sha256(plan.init_adapter / "adapter_model.safetensors")
    return same_start and recorded is not None and recorded == planned


def _shown(argv: list[str]) -> str:
    return shlex.join(["python", *argv[1:]] if argv and argv[0] == sys.executable else argv)


def _child(argv: list[str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"loto: {_shown(argv)} (log {log})", file=sys.stderr, flush=True)
    started = time.monotonic()
    with log.open("w") as fh:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        rc = subprocess.call(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    print(f"loto: exit {rc} after {time.monotonic() - started:.0f} s", file=sys.stderr)
    return rc


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        plan = plan_from(args)
    except ValueError as exc:
        print(f"loto: {exc}", file=sys.stderr)
        return 2
    if not (plan.init_adapter / "adapter_model.safetensors").is_file():
        print(f"loto: no adapter_model.safetensors in {plan.init_adapter}", file=sys.stderr)
        return 2
    commands = [
        _shown(plan.train_argv(a) if kind == "train" else plan.eval_argv(a, t or ""))
        for kind, a, t in plan.steps()
    ]
    if args.plan:
        print("\n".join(commands))
        return 0
    run: dict[str, Any] = {
        "init_adapter": str(plan.init_adapter),
        "init_sha256": _sha256(plan.init_adapter / "adapter_model.safetensors"),
        "budget": f"--examples {plan.examples} --time-budget-minutes "
        f"{plan.time_budget_minutes:g}, at most {plan.max_line_items} line items, "
        f"sequences of at most {plan.max_seq_len} tokens",
        "eval_seeds": f"{plan.eval_seed}-{plan.eval_seed + plan.eval_invoices - 1}",
        "commands": ["fenceline loto " + shlex.join(sys.argv[1:] if argv is None else argv)],
    }
    rows: dict[tuple[str, str], list[dict[str, Any]] | None] = {}
    comparisons: list[dict[str, Any]] = []
    for kind, name, t in plan.steps():
        if kind == "train":
            if reusable(plan, name):
                print(f"loto: {name}: reusing {plan.adapter_dir(name)}", file=sys.stderr)
            elif _child(plan.train_argv(name), plan.out / "logs" / f"train-{name}.log") != 0:
                return 3
            continue
        assert t is not None
        rows[name, t] = _live_rows(plan, name, t)
        if name == CONTROL:
            continue
        ceiling = judge_pairs(plan.eval_pairs([t]), "perfect",
                              max_line_items=plan.max_line_items, progress=False)  # fmt: skip
        trained = {
            col: examples_of(_manifest(plan.adapter_dir(n)), t)
            for col, n in (("control", CONTROL), ("left_out", name))
        }
        comparisons.append(compare(t, rows[CONTROL, t], rows[name, t], ceiling, trained))
        run["adapters"] = {n: _manifest_summary(plan.adapter_dir(n)) for n in plan.adapters}
        run["not_measured"] = [f"{n} on {x}" for (n, x), r in rows.items() if r is None]
        write(plan.out / "report", t, comparisons[-1], run)
        (plan.out / "report" / "loto.md").write_text(markdown(comparisons, run))
    print(markdown(comparisons, run))
    live = [c[col] for c in comparisons for col in ("control", "left_out")]
    if any(t and t["false_accepts"] for t in live):
        return 1
    return 3 if any(t is None for t in live) else 0


def _live_rows(plan: LotoPlan, name: str, transform: str) -> list[dict[str, Any]] | None:
    """The eval rows of adapter ``name`` on ``transform``'s invoices: an earlier report
    of the same adapter folder and the same invoices is read again, else it runs now."""
    pairs = plan.eval_pairs([transform])
    lines = [fuzz_case(s, f, max_line_items=plan.max_line_items).record() for s, f in pairs]
    dataset = plan.dataset_path(transform)
    if not dataset.is_file() or dataset.read_text() != "".join(
        json.dumps(line, ensure_ascii=False) + "\n" for line in lines
    ):
        export(lines, dataset)
    report_path = plan.eval_dir(name, transform) / "report.json"
    adapter = str(plan.adapter_dir(name).resolve())
    if report_path.is_file() and dataset.stat().st_mtime <= report_path.stat().st_mtime:
        report = json.loads(report_path.read_text())
        if report.get("adapter") == adapter and [r["id"] for r in report["rows"]] == [
            line["id"] for line in lines
        ]:
            print(f"loto: {name} on {transform}: reusing {report_path}", file=sys.stderr)
            return list(report["rows"])
    log = plan.out / "logs" / f"eval-{name}-{transform}.log"
    if _child(plan.eval_argv(name, transform), log) != 0 or not report_path.is_file():
        return None
    return list(json.loads(report_path.read_text())["rows"])


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        m = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return m if isinstance(m, dict) else {}


def _manifest_summary(folder: Path) -> dict[str, Any]:
    """What each adapter's training did: steps, time, loss, transformations kept out."""
    m = _manifest(folder)
    keys = ("steps", "steps_planned", "stopped_early", "final_loss", "train_seconds",
            "excluded_transforms", "counts", "command")  # fmt: skip
    return {k: m.get(k) for k in keys}
