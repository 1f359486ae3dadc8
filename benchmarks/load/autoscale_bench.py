"""``fenceline bench autoscale``: a burst against autoscaled drivers (fake provider).

One run, on loopback: a fresh PostgreSQL database, the fake provider (real HTTP,
fixed service time per call) and in-process :class:`~pipeline.worker.DriverLoop` s
in a :class:`~pipeline.worker.LocalDriverFleet` that a
:class:`~pipeline.worker.DriverAutoscaler` scales, the same loop the runtime
supervisor runs over its Ray driver actors. A quiet phase (a few jobs), then a
burst no single driver keeps up with, then silence.

Measured (``autoscale.json`` + ``autoscale.png`` in ``--out``):

* **time to scale up**: from the moment the oldest runnable job's age crossed
  the up threshold (found from the jobs' own ``available_at`` and claim times,
  not from the autoscaler's view) to the first ``backlog_age`` scale-up;
* **peak drivers**, and **time to scale down**: from the last job settling to
  the fleet back at its minimum;
* **leases abandoned**: attempts that ended ``lease_expired`` (left for the
  reaper) or still ``running`` after the run, and drains whose release failed;
  asserted 0, with every job settled.

Timings on a loaded machine are only comparable side by side within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.fake_provider import FakeProvider
from benchmarks.infra import corpus_answer, fresh_database
from benchmarks.invoices.generator import generate_corpus
from pipeline.database import create_pool
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.settings import Settings
from pipeline.tenants import create_tenant, permit_currencies, upsert_supplier
from pipeline.worker import (
    AttemptRunner,
    DriverAutoscaler,
    DriverLoop,
    LocalDriverFleet,
    ScalingConfig,
    WorkerConfig,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--burst", type=int, default=120, help="jobs in the burst (120)")
    p.add_argument("--quiet-jobs", type=int, default=4, help="jobs before the burst (4)")
    p.add_argument("--service-s", type=float, default=0.5, help="provider time per call (0.5)")
    p.add_argument("--concurrency", type=int, default=2, help="leases per driver (2)")
    p.add_argument("--min-drivers", type=int, default=1)
    p.add_argument("--max-drivers", type=int, default=8)
    p.add_argument("--up-age", type=float, default=2.0, help="scale-up age threshold, s (2)")
    p.add_argument("--idle", type=float, default=3.0, help="drained time before scale-down (3)")
    p.add_argument("--cooldown", type=float, default=1.0, help="gap between changes, s (1)")
    p.add_argument("--out", type=Path, default=Path("results/autoscale"))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    config = ScalingConfig(
        min_drivers=args.min_drivers,
        max_drivers=args.max_drivers,
        scale_up_age_seconds=args.up_age,
        scale_down_age_seconds=min(0.5, args.up_age / 4),
        scale_down_idle_seconds=args.idle,
        cooldown_seconds=args.cooldown,
    )
    corpus = generate_corpus(24, seed=2020, max_line_items=2, anchor=datetime.now(UTC).date())
    async with fresh_database() as dsn:
        settings = Settings(database_url=dsn, lease_seconds=30, duplicate_invoice_check=False)
        pool = await create_pool(dsn, min_size=2, max_size=12)
        try:
            store = JobStore(pool, settings)
            async with pool.acquire() as conn:
                tenant = await create_tenant(conn, f"burst-{int(time.time())}")
                for inv in corpus:
                    await upsert_supplier(conn, tenant.id, inv.supplier)
                await permit_currencies(conn, tenant.id, {inv.currency for inv in corpus})
            with FakeProvider(answer=corpus_answer(corpus)) as fake:
                fake.set_faults({"latency": {"dist": "fixed", "a": args.service_s}})
                async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
                    return await _burst(args, config, store, engine, corpus, tenant.id)
        finally:
            await pool.close()


async def _burst(
    args: argparse.Namespace,
    config: ScalingConfig,
    store: JobStore,
    engine: OpenAICompatibleEngine,
    corpus: list[Any],
    tenant_id: Any,
) -> dict[str, Any]:
    def make(i: int) -> DriverLoop:
        cfg = WorkerConfig(
            worker_id=f"burst-driver-{i}",
            concurrency=args.concurrency,
            claim_batch=args.concurrency,
            idle_poll_seconds=0.2,
            heartbeat_seconds=5,
            max_output_tokens=2048,
        )
        return DriverLoop(AttemptRunner(store, engine, cfg))

    fleet = LocalDriverFleet(make, grace_seconds=10)
    scaler = DriverAutoscaler(
        store, fleet, config, concurrency=args.concurrency, interval_seconds=0.25
    )
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            b = await store.backlog()
            samples.append(
                {
                    "t": round(time.monotonic() - t0, 3),
                    "drivers": fleet.size(),
                    "runnable": b["runnable"],
                    "running": b["running"],
                    "oldest_age_s": float(b["oldest_runnable_age_seconds"] or 0),
                }
            )
            await asyncio.sleep(0.25)

    async def submit(n: int, tag: str) -> None:
        for i in range(n):
            inv = corpus[i % len(corpus)]
            await store.accept(AcceptRequest(tenant_id, f"{tag}-{i}", DocumentIn(inv.ocr_text)))

    total = args.quiet_jobs + args.burst
    await fleet.add(config.min_drivers)
    await scaler.start()
    sampler = asyncio.create_task(sample())
    try:
        await submit(args.quiet_jobs, "quiet")
        await asyncio.sleep(3.0)
        burst_at = time.monotonic()
        await submit(args.burst, "burst")
        settled_at = await _wait_settled(store, total, timeout=600)
        while fleet.size() > config.min_drivers and time.monotonic() - settled_at < 120:
            await asyncio.sleep(0.1)
        await scaler.settle()
        down_at = time.monotonic()
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        await sampler
        await scaler.stop()
        await fleet.close()
    crossed = await _threshold_crossed(store, config.scale_up_age_seconds, burst_at)
    first_up = next((e for e in scaler.events if e.reason == "backlog_age"), None)
    abandoned = await _abandoned(store)
    result = {
        "scenario": "autoscale-burst",
        "engine": "fake provider (fixed service time)",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "config": asdict(config),
        "jobs": total,
        "states": await _states(store),
        "threshold_crossed_s": _rel(crossed, t0),
        "first_scale_up_s": _rel(first_up.at if first_up else None, t0),
        "time_to_scale_up_s": (
            round(first_up.at - crossed, 3) if first_up and crossed is not None else None
        ),
        "peak_drivers": max((s["drivers"] for s in samples), default=0),
        "last_settled_s": _rel(settled_at, t0),
        "back_to_min_s": _rel(down_at, t0),
        "time_to_scale_down_s": round(down_at - settled_at, 3),
        "leases_abandoned": abandoned + scaler.drains.unreleased,
        "attempt_outcomes": await _outcomes(store),
        "drains": asdict(scaler.drains),
        "events": [{**asdict(e), "at": _rel(e.at, t0)} for e in scaler.events],
        "samples": samples,
    }
    return result


def _rel(t: float | None, t0: float) -> float | None:
    return round(t - t0, 3) if t is not None else None


async def _wait_settled(store: JobStore, n: int, *, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = await _states(store)
        if sum(states.get(s, 0) for s in ("SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL")) >= n:
            return time.monotonic()
        await asyncio.sleep(0.1)
    raise TimeoutError(f"jobs not settled in {timeout} s: {await _states(store)}")


async def _states(store: JobStore) -> dict[str, int]:
    async with store.pool.acquire() as conn:
        rows = await conn.fetch(_q("bench_job_states"))
    return {r["state"]: r["n"] for r in rows}


async def _outcomes(store: JobStore) -> dict[str, int]:
    async with store.pool.acquire() as conn:
        rows = await conn.fetch(_q("bench_attempt_outcomes"))
    return {r["outcome"]: r["n"] for r in rows}


async def _abandoned(store: JobStore) -> int:
    got = await _outcomes(store)
    return got.get("lease_expired", 0) + got.get("running", 0)


async def _threshold_crossed(store: JobStore, age: float, since: float) -> float | None:
    """Monotonic time the oldest waiting burst job first reached ``age``: the earliest
    ``created_at + age`` of a burst job whose first claim came later (or never)."""
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow(_q("bench_age_threshold_crossed"), float(age))
    if row is None or row["crossed_at"] is None:
        return None
    # Database time to monotonic time: the burst's first insert is ``since`` in both.
    offset: float = (row["crossed_at"] - row["burst_start"]).total_seconds()
    return since + offset


def _q(name: str) -> str:
    from pipeline.queries import q

    return q(name)


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "autoscale.json").write_text(json.dumps(result, indent=2, default=str))
    s = result["samples"]
    ts = [x["t"] for x in s]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.step(ts, [x["drivers"] for x in s], where="post", label="drivers", color="C3")
    top.set_ylabel("drivers")
    for key, label in (("threshold_crossed_s", "age threshold"), ("last_settled_s", "drained")):
        if result.get(key) is not None:
            top.axvline(result[key], ls="--", color="grey")
            top.text(result[key], top.get_ylim()[1] * 0.9, f" {label}", fontsize=8)
    top.set_title(
        f"burst of {result['args']['burst']}: up {result['time_to_scale_up_s']} s after the "
        f"threshold, peak {result['peak_drivers']}, down {result['time_to_scale_down_s']} s "
        f"after the last job; leases abandoned {result['leases_abandoned']}",
        fontsize=9,
    )
    bottom.plot(ts, [x["runnable"] for x in s], label="runnable")
    bottom.plot(ts, [x["running"] for x in s], label="running")
    ax2 = bottom.twinx()
    ax2.plot(ts, [x["oldest_age_s"] for x in s], color="C2", ls=":", label="oldest age (s)")
    ax2.set_ylabel("oldest runnable age, s")
    bottom.set_xlabel("seconds since start")
    bottom.set_ylabel("jobs")
    bottom.legend(loc="upper left")
    ax2.legend(loc="upper right")
    path = out / "autoscale.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [out / "autoscale.json", path]


def main(args: argparse.Namespace) -> int:
    args.out = args.out or Path("results/autoscale")
    result = asyncio.run(run(args))
    paths = write_outputs(result, args.out)
    keys = (
        "states", "threshold_crossed_s", "first_scale_up_s", "time_to_scale_up_s",
        "peak_drivers", "last_settled_s", "time_to_scale_down_s", "leases_abandoned",
        "attempt_outcomes", "drains",
    )  # fmt: skip
    for k in keys:
        print(f"{k}: {result[k]}")
    print("results:", ", ".join(map(str, paths)))
    settled = set(result["states"]) <= {"SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL"}
    if result["leases_abandoned"] or not settled:
        print("FAILED: a lease was abandoned or a job did not settle", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.autoscale_bench")
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
