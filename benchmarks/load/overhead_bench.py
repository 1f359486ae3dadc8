"""Pipeline overhead over the engine: ``pipeline_vs_direct`` on its own.

Run: ``python -m benchmarks.load.overhead_bench [--documents 40] [--scenario smoke]
[--engine vllm-cpu] [--rounds 3]``

Starts the scenario's engine (the fake provider for ``smoke``), then runs
:func:`benchmarks.load.baselines.pipeline_vs_direct` — direct, pipeline, direct
again, the ratio against the second (warm) direct pass — without the main run
and the other baselines, so the drain-time ratio can be measured (and
profiled: ``py-spy record -o results/profiles/driver.svg -- python -m
benchmarks.load.overhead_bench``) in well under a minute. Prints the ratios and
writes ``results/overhead/overhead_bench.json``.

``--engine vllm-cpu`` runs it on CPU vLLM with the scenario's ``profiles.vllm-cpu``
fields (for ``smoke``: 8 small invoices, a few minutes per pass). That engine's
speed drifts on a shared machine, so ``--rounds N`` alternates N pipeline passes
with direct passes and reports the median of each pipeline pass over the mean of
its two neighbouring direct passes.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from benchmarks.engines.bench_engine import BenchEngine
from benchmarks.load.baselines import pipeline_vs_direct
from benchmarks.report import write_json
from benchmarks.scenario import ENGINE_KINDS, load_scenario, with_engine

OUT = Path(__file__).resolve().parents[2] / "results" / "overhead"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    scenario = load_scenario(args.scenario)
    if args.engine is not None:
        scenario = with_engine(scenario, args.engine)
    documents = args.documents or scenario.baselines.direct_documents
    scenario = scenario.model_copy(
        update={"baselines": scenario.baselines.model_copy(update={"direct_documents": documents})}
    )
    engine = BenchEngine(scenario)
    await engine.start()
    try:
        result = await pipeline_vs_direct(scenario, engine, rounds=args.rounds)
    finally:
        await engine.stop()
    d, p = result["direct"], result["pipeline"]
    print(
        f"direct {d['wall_s']:.2f} s (cold {result['direct_cold']['wall_s']:.2f} s)  "
        f"pipeline drain {p['drain_s']:.2f} s  outcomes {p['outcomes']}"
    )
    if "rounds_detail" in result:
        print(f"   direct passes   {[round(x, 2) for x in result['direct_passes_s']]} s")
        print(f"   pipeline passes {[round(x, 2) for x in result['pipeline_passes_s']]} s")
        per_round = [round(r["drain_time"], 3) for r in result["rounds_detail"]]
        print(f"   drain ratio per round {per_round}")
    for k, v in result["ratios"].items():
        print(f"   {k:20s} {v:6.3f}")
    print(write_json(OUT, "overhead_bench", {"params": vars(args), **result}))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.overhead_bench")
    parser.add_argument(
        "--documents", type=int, default=None, help="documents per pass (the scenario's)"
    )
    parser.add_argument("--scenario", default="smoke")
    parser.add_argument("--engine", choices=ENGINE_KINDS, default=None, help="override the kind")
    parser.add_argument(
        "--rounds", type=int, default=1, help="pipeline passes, each between two direct passes"
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
