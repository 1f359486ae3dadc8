"""``python -m benchmarks SCENARIO``: run a pipeline benchmark scenario.

SCENARIO is a name under ``benchmarks/scenarios/`` (``smoke``, ``burst2000``,
``gpu-h200``, ``gpu-h100``) or a path to a YAML file. Results go to
``results/<scenario>/`` (JSON + PNGs) and a one-screen summary is printed; a
progress line runs on stderr meanwhile. ``--engine vllm-cpu`` runs the
scenario on the CPU vLLM pools (``benchmarks/pools/cpu-smoke.yaml``) with the
fields of its ``profiles.vllm-cpu`` section, if it has one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from benchmarks.scenario import BaselineSpec, ScenarioError, load_scenario, with_engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("scenario", help="scenario name or YAML path")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--engine", choices=["fake", "vllm-cpu", "vllm-gpu"], default=None)
    parser.add_argument("--no-baselines", action="store_true", help="main run only")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario)
        if args.engine and args.engine != scenario.engine.kind:
            scenario = with_engine(scenario, args.engine)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.no_baselines:
        scenario = scenario.model_copy(update={"baselines": BaselineSpec()})
    from benchmarks.load.suite import run_scenario
    from benchmarks.load.summary import summary

    out = args.out or Path("results") / scenario.name
    result = asyncio.run(run_scenario(scenario, out, progress=not args.quiet))
    print(summary(result))
    print(f"results in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
