"""``python -m benchmarks SCENARIO``: run a pipeline benchmark scenario.

SCENARIO is a name under ``benchmarks/scenarios/`` (``smoke``, ``burst2000``) or
a path to a YAML file. Results go to ``results/<scenario>/`` (JSON + PNGs) and
a one-screen summary is printed; a progress line runs on stderr meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from benchmarks.pipeline_bench import (
    SCENARIO_DIR,
    UnsupportedEngine,
    load_scenario,
    run_scenario,
    summary,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("scenario", help="scenario name or YAML path")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario)
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))
        print(f"error: no scenario {args.scenario!r} (known: {known})", file=sys.stderr)
        return 2
    out = args.out or Path("results") / scenario.name
    try:
        result = asyncio.run(run_scenario(scenario, out, progress=not args.quiet))
    except UnsupportedEngine as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(result))
    print(f"results in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
