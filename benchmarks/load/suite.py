"""One benchmark scenario end to end: the main run, then its side-by-side baselines.

The main run is :func:`benchmarks.load.runner.run_pipeline`; the baselines
(:mod:`benchmarks.load.baselines`) run against the same engine while it is up, then
the local ones; their ratios join the result.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.engines.bench_engine import BenchEngine
from benchmarks.engines.roofline import roofline_report
from benchmarks.load.baselines import headline, run_engine_baselines, run_local_baselines
from benchmarks.load.plots import write_plots
from benchmarks.load.runner import log, run_pipeline
from benchmarks.report import write_json
from benchmarks.scenario import Scenario


async def run_scenario(
    scenario: Scenario, out_dir: Path | None = None, *, progress: bool = True
) -> dict[str, Any]:
    """Run one scenario and its baselines; return (and with ``out_dir``, write) the result."""
    wall0 = time.monotonic()
    engine = BenchEngine(scenario)
    await engine.start(log if progress else None)
    if progress:
        log(f"engine {scenario.engine.kind} ready after {engine.start_seconds:.1f} s")
    try:
        result = await run_pipeline(scenario, engine, progress=progress)
        result["engine"]["start_s"] = engine.start_seconds
        wall_main = time.monotonic() - wall0
        baselines = await run_engine_baselines(scenario, engine, progress=progress)
    finally:
        await engine.stop()
    baselines.update(await run_local_baselines(scenario, progress=progress))
    baselines["headline"] = headline(baselines)
    result["baselines"] = baselines
    if scenario.roofline is not None:
        result["roofline"] = roofline_report(scenario.roofline, result)
    result["wall_s"] = {"main_incl_engine_start": wall_main, "total": time.monotonic() - wall0}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        result["files"] = [str(write_json(out_dir, "result", result))]
        result["files"] += [str(p) for p in write_plots(out_dir, result)]
    return result
