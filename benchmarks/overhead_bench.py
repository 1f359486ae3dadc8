"""Pipeline overhead over the engine: ``pipeline_vs_direct`` on its own.

Run: ``python -m benchmarks.overhead_bench [--documents 40] [--scenario smoke]``

Starts the scenario's engine (the fake provider for ``smoke``), then runs
:func:`benchmarks.baselines.pipeline_vs_direct` — direct, pipeline, direct
again, the ratio against the second (warm) direct pass — without the main run
and the other baselines, so the drain-time ratio can be measured (and
profiled: ``py-spy record -o results/profiles/driver.svg -- python -m
benchmarks.overhead_bench``) in well under a minute. Prints the ratios and
writes ``results/overhead/overhead_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from benchmarks.baselines import pipeline_vs_direct
from benchmarks.engine_setup import BenchEngine
from benchmarks.report import write_json
from benchmarks.scenario import load_scenario

OUT = Path(__file__).resolve().parent.parent / "results" / "overhead"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    scenario = load_scenario(args.scenario)
    scenario = scenario.model_copy(
        update={
            "baselines": scenario.baselines.model_copy(update={"direct_documents": args.documents})
        }
    )
    engine = BenchEngine(scenario)
    await engine.start()
    try:
        result = await pipeline_vs_direct(scenario, engine)
    finally:
        await engine.stop()
    d, p = result["direct"], result["pipeline"]
    print(
        f"direct {d['wall_s']:.2f} s (cold {result['direct_cold']['wall_s']:.2f} s)  "
        f"pipeline drain {p['drain_s']:.2f} s  outcomes {p['outcomes']}"
    )
    for k, v in result["ratios"].items():
        print(f"   {k:20s} {v:6.3f}")
    print(write_json(OUT, "overhead_bench", {"params": vars(args), **result}))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead_bench")
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--scenario", default="smoke")
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
