"""Side-by-side baselines, run in the same process right after the main run.

These machines are noisy, so the headline figures are ratios of two things
measured back to back, never absolute rates:

* ``pipeline_vs_direct``: the same ``direct_documents`` requests (what the
  drivers send: :func:`prepare_call`'s prompt, grammar and output cap; before
  2026-12-02 the direct side sent the older plain prompt and schema, so the
  fake provider, which draws each latency from the prompt, slept 15 % less on
  it) sent (a) straight to the
  engine with as many requests in flight as admission allows the pipeline,
  and (b) as a one-shot burst through the whole pipeline (REST intake, job
  store, scheduler, admission, drivers, validation). Both sides use the
  engine the main run used (fake provider, or the vLLM pools behind Serve:
  for vLLM the direct side calls the inference app's handle, i.e. vLLM
  without intake, store, admission and drivers). Ratio: pipeline drain time
  over direct wall time, and the p50 of time-since-submission.
* ``store_vs_raw``: :mod:`benchmarks.load.store_bench`: claim+complete through
  :class:`pipeline.jobs.store.JobStore` vs a raw ``SKIP LOCKED`` loop doing the same
  SQL work (fresh database per variant, same jobs and workers).
* ``serve_vs_starlette``: :mod:`benchmarks.load.intake_bench`: the intake API as a
  Ray Serve ingress, under plain uvicorn, and a bare Starlette endpoint, each
  under the same closed-loop load.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from benchmarks.engines.bench_engine import (
    BenchEngine,
    RecordingEngine,
    close_engine,
    timing_summary,
)
from benchmarks.engines.metrics import side_summary
from benchmarks.load.runner import run_pipeline
from benchmarks.report import percentile
from benchmarks.scenario import (
    ArrivalSpec,
    BaselineSpec,
    DeliverySpec,
    Scenario,
    scenario_corpus,
)
from pipeline.extraction import Messages
from pipeline.extraction.extractor import prepare_call
from pipeline.worker import WorkerConfig


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when either is missing or the denominator is 0."""
    if denominator == 0 or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    return numerator / denominator


def direct_concurrency(scenario: Scenario) -> int:
    """Requests in flight on the direct side: what admission lets the pipeline have."""
    drivers = scenario.drivers.count * scenario.drivers.concurrency
    limit = scenario.admission.concurrency
    return min(drivers, limit) if limit else drivers


async def direct_run(scenario: Scenario, engine: BenchEngine, documents: int) -> dict[str, Any]:
    """The engine called directly with the drivers' own requests, closed loop.

    Each request is what a driver sends for the document (:func:`prepare_call` with
    the drivers' contract, prompt and output cap), built before the clock starts:
    the engine then does the same work on both sides (the fake provider draws its
    latency from the prompt, vLLM decodes the same grammar), and building the
    prompt counts as the pipeline's overhead, not the engine's.
    """
    corpus = scenario_corpus(scenario)
    cfg = WorkerConfig(worker_id="direct", max_output_tokens=scenario.engine.max_output_tokens)
    requests = [
        prepare_call(
            corpus[i % len(corpus)].ocr_text,
            contract=cfg.contract,
            include_schema=cfg.include_schema_in_prompt,
        )
        for i in range(documents)
    ]
    client = RecordingEngine(engine.engine())
    gate = asyncio.Semaphore(direct_concurrency(scenario))
    since_submit: list[float] = []
    core_before = await engine.metrics_snapshot()
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        request = requests[i]
        budget = request.budget(cfg.max_output_tokens)
        async with gate:
            try:
                await client.complete(
                    cast(Messages, request.messages),
                    json_schema=request.json_schema,
                    max_tokens=budget.max_output_tokens,
                    timeout=scenario.engine.attempt_timeout_s,
                )
            except Exception:  # counted by RecordingEngine; settled all the same
                pass
        since_submit.append(time.perf_counter() - t0)

    try:
        await asyncio.gather(*(one(i) for i in range(documents)))
    finally:
        await close_engine(client)
    wall = time.perf_counter() - t0
    core_after = await engine.metrics_snapshot()
    timings = timing_summary(client.calls, streams=engine.streams)
    if core_before is not None and core_after is not None:
        timings["engine_core"] = side_summary(core_before, core_after)
    return {
        "documents": documents,
        "concurrency": direct_concurrency(scenario),
        "wall_s": wall,
        "ok": sum(1 for c in client.calls if c.ok),
        "since_submit_p50_s": percentile(since_submit, 50),
        "since_submit_p99_s": percentile(since_submit, 99),
        "engine": timings,
    }


def burst_of(scenario: Scenario, documents: int) -> Scenario:
    """The scenario as a one-shot burst of ``documents`` jobs, no delivery, no baselines."""
    return scenario.model_copy(
        update={
            "name": f"{scenario.name}-burst",
            "arrival": ArrivalSpec(process="burst", count=documents),
            "delivery": DeliverySpec(enabled=False),
            "baselines": BaselineSpec(),
            "capacity_check": False,
        }
    )


def round_ratios(
    pipes: list[dict[str, Any]], directs: list[dict[str, Any]]
) -> list[dict[str, float]]:
    """Each pipeline pass over the direct passes around it.

    One pipeline pass and one direct pass (the classic order): that direct pass.
    Otherwise ``directs`` has one more pass than ``pipes`` (``D0 P0 D1 P1 D2 ...``)
    and pass ``i`` is compared with the mean of ``D_i`` and ``D_{i+1}``, so an
    engine that slows down or speeds up during the run does not tilt the ratio.
    """
    if len(directs) not in (len(pipes), len(pipes) + 1):
        raise ValueError(f"{len(pipes)} pipeline passes need as many or one more direct")
    width = 1 if len(directs) == len(pipes) else 2
    detail = []
    for i, pipe in enumerate(pipes):
        around = directs[i : i + width]
        detail.append(
            {
                key: ratio(pipe[p_key], sum(d[d_key] for d in around) / len(around))
                for key, p_key, d_key in (
                    ("drain_time", "drain_s", "wall_s"),
                    ("p50_since_submit", "since_submit_p50_s", "since_submit_p50_s"),
                    ("p99_since_submit", "since_submit_p99_s", "since_submit_p99_s"),
                )
            }
        )
    return detail


async def pipeline_vs_direct(
    scenario: Scenario, engine: BenchEngine, *, rounds: int = 1
) -> dict[str, Any]:
    """The same documents through the whole pipeline and straight to the engine.

    Direct, pipeline, direct again: the engine's prefix cache holds the prompts
    after the first pass, so the ratio compares the pipeline with the second
    (equally warm) direct pass; the first is reported as ``direct_cold``.

    ``rounds`` > 1 is for engines whose speed drifts within a run (CPU vLLM on a
    shared machine: the same direct pass took 46 and 52 s minutes apart): after the
    cold pass, one warm direct pass, then ``rounds`` times a pipeline pass and a
    direct pass; each pipeline pass is compared with the mean of the direct passes
    on either side of it, and the headline ratios are the medians over the rounds
    (``rounds_detail`` holds each).
    """
    n = scenario.baselines.direct_documents
    cold = await direct_run(scenario, engine, n)
    directs = [] if rounds == 1 else [await direct_run(scenario, engine, n)]
    pipes: list[dict[str, Any]] = []
    for _ in range(rounds):
        through = await run_pipeline(burst_of(scenario, n), engine, progress=False)
        pipes.append(
            {
                "documents": n,
                "drain_s": through["duration_s"]["last_settled"],
                "outcomes": through["outcomes"],
                "since_submit_p50_s": through["completion_latency_s"]["p50"],
                "since_submit_p99_s": through["completion_latency_s"]["p99"],
                "engine": through["engine"],
            }
        )
        directs.append(await direct_run(scenario, engine, n))
    detail = round_ratios(pipes, directs)
    out: dict[str, Any] = {
        "direct_cold": cold,
        "direct": directs[-1],
        "pipeline": pipes[-1],
        "ratios": {key: statistics.median(r[key] for r in detail) for key in detail[0]},
    }
    if rounds > 1:
        out["rounds_detail"] = detail
        out["direct_passes_s"] = [d["wall_s"] for d in directs]
        out["pipeline_passes_s"] = [p["drain_s"] for p in pipes]
        out["pipeline_outcomes"] = [p["outcomes"] for p in pipes]
    return out


async def store_vs_raw(spec: BaselineSpec) -> dict[str, Any]:
    from benchmarks.load import store_bench

    out: dict[str, float] = {}
    variants: dict[str, Callable[[str], Awaitable[tuple[int, float]]]] = {
        "raw_skip_locked": lambda dsn: store_bench.run_raw(dsn, spec.store_workers),
        "store_single": lambda dsn: store_bench.run_store(dsn, spec.store_workers, 1),
        "store_batch": lambda dsn: store_bench.run_store(dsn, spec.store_workers, spec.store_batch),
        "store_settle_batch": lambda dsn: store_bench.run_store_settle_batch(
            dsn, spec.store_workers, spec.store_batch
        ),
    }
    for name, fn in variants.items():
        db = await store_bench.fresh_db(spec.store_jobs, 2)
        dsn = store_bench.dsn_of(db)
        try:
            done, elapsed = await fn(dsn)  # the workers' time, connection set-up excluded
        finally:
            await store_bench.drop_db(db)
        if done != spec.store_jobs:
            raise RuntimeError(f"{name} completed {done} of {spec.store_jobs} jobs")
        out[name] = done / elapsed
    return {
        "jobs": spec.store_jobs,
        "workers": spec.store_workers,
        "batch": spec.store_batch,
        "jobs_per_s": out,
        "ratios": {
            "store_batch_vs_raw": ratio(out["store_batch"], out["raw_skip_locked"]),
            "store_single_vs_raw": ratio(out["store_single"], out["raw_skip_locked"]),
            # Claims and completions both batched (succeed_many) over one at a time.
            "store_settle_batch_vs_single": ratio(out["store_settle_batch"], out["store_single"]),
        },
    }


async def serve_vs_starlette(spec: BaselineSpec) -> dict[str, Any]:
    from benchmarks.load import intake_bench

    args = argparse.Namespace(
        seconds=spec.intake_seconds,
        warmup=spec.intake_warmup_s,
        concurrency=spec.intake_concurrency,
        tenants=2,
        client="raw",
    )
    results = {
        "starlette": await intake_bench.run_starlette(args),
        "uvicorn": await intake_bench.run_uvicorn(args),
        "serve": await intake_bench.run_serve(args),
    }
    s, u, b = results["serve"], results["uvicorn"], results["starlette"]
    return {
        "seconds": spec.intake_seconds,
        "concurrency": spec.intake_concurrency,
        "client": args.client,
        "results": results,
        "ratios": {
            "serve_vs_starlette_throughput": ratio(s["jobs_per_s"], b["jobs_per_s"]),
            "serve_vs_starlette_p50": ratio(s["p50_ms"], b["p50_ms"]),
            "serve_vs_uvicorn_throughput": ratio(s["jobs_per_s"], u["jobs_per_s"]),
            "uvicorn_vs_starlette_throughput": ratio(u["jobs_per_s"], b["jobs_per_s"]),
        },
    }


#: Which ratio of each baseline is the headline, and how the summary labels it.
HEADLINE = {
    "pipeline_vs_direct": ("drain_time", "pipeline/direct drain time"),
    "store_vs_raw": ("store_batch_vs_raw", "store/raw claim+complete rate"),
    "serve_vs_starlette": ("serve_vs_starlette_throughput", "Serve/Starlette intake rate"),
}


def headline(baselines: dict[str, Any]) -> dict[str, float]:
    """The one ratio per baseline that leads the summary."""
    out = {}
    for name, (key, label) in HEADLINE.items():
        got = baselines.get(name)
        if isinstance(got, dict) and "ratios" in got:
            out[label] = float(got["ratios"][key])
    return out


async def run_engine_baselines(
    scenario: Scenario, engine: BenchEngine, *, progress: bool = True
) -> dict[str, Any]:
    """Baselines that need the running engine (only ``pipeline_vs_direct``)."""
    out: dict[str, Any] = {}
    if "pipeline_vs_direct" in scenario.baselines.run:
        if progress:
            _log("baseline pipeline_vs_direct ...")
        t0 = time.monotonic()
        out["pipeline_vs_direct"] = await pipeline_vs_direct(scenario, engine)
        out["pipeline_vs_direct"]["wall_s"] = time.monotonic() - t0
    return out


async def run_local_baselines(scenario: Scenario, *, progress: bool = True) -> dict[str, Any]:
    """Baselines that start their own processes (run after the engine stopped)."""
    out: dict[str, Any] = {}
    runs = {"store_vs_raw": store_vs_raw, "serve_vs_starlette": serve_vs_starlette}
    for name, fn in runs.items():
        if name in scenario.baselines.run:
            if progress:
                _log(f"baseline {name} ...")
            t0 = time.monotonic()
            out[name] = await fn(scenario.baselines)
            out[name]["wall_s"] = time.monotonic() - t0
    return out
