"""Retention over many settled jobs: what one pass removes, whether it removed exactly
what the policy says, and what it does to a worker's claims while it runs.

Run: ``python -m benchmarks.load.retention_bench [--jobs 1000000] [--held 10000]
[--ready 60000] [--batch 500] [--quiet-seconds 60] [--out-dir reports]`` (writes
``retention.json`` there; exits 1 when the removal check fails).

A fresh migrated database (:func:`benchmarks.infra.fresh_database`) gets ``--jobs``
settled jobs of one tenant under the default policy (content 30 days, audit 365)
and ``--held`` of a tenant under a legal hold, generated in bulk by SQL with every
row a real job has (:mod:`benchmarks.load.retention_data`: 60 % finished past the
content horizon, 15 % past the audit horizon, 1 in 20 REVIEW_REQUIRED, job legal
holds planted on due jobs, some document text shared with a job not yet due), and
``--ready`` READY jobs of a third tenant. One worker loop claims one job
(:meth:`~pipeline.jobs.JobStore.claim`), settles it
(:meth:`~pipeline.jobs.JobStore.succeed`) and waits ``--probe-interval`` seconds,
timing each claim, on its own pool:

1. **quiet**: ``--quiet-seconds`` of that loop with nothing else running;
2. **during**: the loop for as long as one :func:`~pipeline.jobs.run_retention` pass
   over every tenant runs in batches of ``--batch``, on another pool.

Before the pass the policy's due rows are counted from the data; afterwards every
job, result, document and history row is compared with them, and the rows gone per
table with the counts. The JSON report gives claim p50/p95/p99 quiet and during and
the ratio of the p99s (one run, side by side; the issue's target is ≤ 1.2), the
rows removed per table, the pass's wall time, batches and longest batch, and the
check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks.infra import fresh_database
from benchmarks.load.retention_data import (
    add_ready,
    expected_removal,
    generate_settled,
    removed_per_table,
    table_counts,
    verify_removal,
)
from benchmarks.report import write_json
from pipeline.database import create_pool
from pipeline.jobs import JobStore, RetentionConfig, run_retention, set_legal_hold
from pipeline.settings import Settings
from pipeline.tenants import create_tenant


def log(message: str) -> None:
    print(f"[retention {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile_ms(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (seconds), in milliseconds."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0, 3)


def latency(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_ms": percentile_ms(values, 0.50),
        "p95_ms": percentile_ms(values, 0.95),
        "p99_ms": percentile_ms(values, 0.99),
        "max_ms": round(max(values) * 1000.0, 3),
    }


async def worker_loop(
    store: JobStore, until: asyncio.Event, interval: float
) -> tuple[list[float], list[float]]:
    """Claim one job, settle it, wait ``interval``; again until ``until`` is set (at
    least once). Returns the time of each claim and of each settle."""
    claims: list[float] = []
    settles: list[float] = []
    while True:
        t0 = time.perf_counter()
        leases = await store.claim("retention-probe")
        t1 = time.perf_counter()
        claims.append(t1 - t0)
        if not leases:
            raise RuntimeError("the worker ran out of READY jobs: raise --ready")
        await store.succeed(
            leases[0],
            result={"invoice_number": f"PROBE-{leases[0].job_id}"},
            validation={"reasons": []},
        )
        settles.append(time.perf_counter() - t1)
        if until.is_set():
            return claims, settles
        try:
            await asyncio.wait_for(until.wait(), interval)
        except TimeoutError:
            pass


async def _prepare(pool: asyncpg.Pool, args: argparse.Namespace) -> dict[str, Any]:
    async with pool.acquire() as conn:
        settled = await create_tenant(conn, "retention-settled", max_in_flight=100_000)
        held = await create_tenant(conn, "retention-held", max_in_flight=100_000)
        live = await create_tenant(conn, "retention-live", max_in_flight=100_000)
        now = await conn.fetchval("SELECT now()")
        seconds = await generate_settled(
            conn, settled.id, args.jobs, now=now, prefix="s", progress=log
        )
        seconds += await generate_settled(conn, held.id, args.held, now=now, prefix="h")
        await add_ready(conn, live.id, args.ready)
    await set_legal_hold(pool, held.id, reason="benchmark tenant hold", actor="retention-bench")
    t0 = time.perf_counter()
    async with pool.acquire() as conn:
        await conn.execute("VACUUM ANALYZE")
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
    log(f"generated in {seconds:.0f} s, vacuumed in {time.perf_counter() - t0:.0f} s, {size}")
    return {
        "tenants": [settled.id, held.id],
        "generate_seconds": round(seconds, 1),
        "vacuum_seconds": round(time.perf_counter() - t0, 1),
        "database_size": size,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    config = RetentionConfig(batch=args.batch, pause_ratio=args.pause_ratio)
    horizons = {"content_days": config.content_days, "audit_days": config.audit_days}
    async with fresh_database() as dsn:
        pool = await create_pool(dsn, min_size=1, max_size=2)
        probe_pool = await create_pool(dsn, min_size=1, max_size=2)
        try:
            prepared = await _prepare(pool, args)
            tenants = prepared.pop("tenants")
            async with pool.acquire() as conn:
                before = await table_counts(conn, tenants)
                pass_now = await conn.fetchval("SELECT now()")
                expected = await expected_removal(conn, pass_now, tenants, **horizons)
            log(f"due: {expected.as_dict()}")
            store = JobStore(probe_pool, Settings(database_url=dsn, lease_seconds=3600))
            await worker_loop(store, _set_after_one(), 0)  # plan the statements first

            done = asyncio.Event()
            quiet_task = asyncio.create_task(worker_loop(store, done, args.probe_interval))
            await asyncio.sleep(args.quiet_seconds)
            done.set()
            quiet_claims, quiet_settles = await quiet_task
            log(f"quiet: {len(quiet_claims)} claims; the pass starts")

            done = asyncio.Event()
            during_task = asyncio.create_task(worker_loop(store, done, args.probe_interval))
            report = await run_retention(pool, config)
            done.set()
            during_claims, during_settles = await during_task
            log(f"pass done in {report.seconds:.0f} s; checking")

            async with pool.acquire() as conn:
                after = await table_counts(conn, tenants)
                mismatches = await verify_removal(conn, pass_now, tenants, **horizons)
        finally:
            await probe_pool.close()
            await pool.close()
    removed = removed_per_table(before, after)
    quiet, during = latency(quiet_claims), latency(during_claims)
    want = expected.as_dict()
    check = {
        "mismatches": mismatches,
        "removed_equals_due": {
            t: removed[t] == want[t]
            for t in ("results", "documents", "job_events", "inbox_records")
        },
        "pass_counts_equal_due": {
            "content_jobs": report.content_jobs == expected.content_jobs,
            "audit_jobs": report.audit_jobs == expected.audit_jobs,
            "results": report.results == expected.results,
            "documents": report.documents == expected.documents,
            "job_events": report.job_events == expected.job_events,
        },
        "jobs_and_attempts_kept": removed["jobs"] == 0 and removed["attempts"] == 0,
        "batches_bounded": report.largest_batch <= args.batch,
    }
    check["ok"] = (
        not any(mismatches.values())
        and all(check["removed_equals_due"].values())
        and all(check["pass_counts_equal_due"].values())
        and bool(check["jobs_and_attempts_kept"])
        and bool(check["batches_bounded"])
    )
    return {
        "jobs": args.jobs,
        "held_tenant_jobs": args.held,
        "ready": args.ready,
        "batch": args.batch,
        "pause_ratio": args.pause_ratio,
        **prepared,
        "due": want,
        "rows_before": before,
        "removed_per_table": removed,
        "pass": report.as_dict(),
        "pass_jobs_per_second": round(
            (report.content_jobs + report.audit_jobs) / max(report.seconds, 1e-9), 1
        ),
        "claim_quiet": quiet,
        "claim_during_pass": during,
        "settle_quiet": latency(quiet_settles),
        "settle_during_pass": latency(during_settles),
        "claim_p99_ratio_during_vs_quiet": round(during["p99_ms"] / quiet["p99_ms"], 3),
        "claim_p50_ratio_during_vs_quiet": round(during["p50_ms"] / quiet["p50_ms"], 3),
        "check": check,
    }


def _set_after_one() -> asyncio.Event:
    """An event already set: :func:`worker_loop` then runs exactly one cycle."""
    event = asyncio.Event()
    event.set()
    return event


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--held", type=int, default=10_000, help="jobs of the tenant under a hold")
    p.add_argument("--ready", type=int, default=60_000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--pause-ratio", type=float, default=RetentionConfig().pause_ratio)
    p.add_argument("--probe-interval", type=float, default=0.01)
    p.add_argument("--quiet-seconds", type=float, default=60.0)
    p.add_argument("--out-dir", type=Path, default=Path("reports"))
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    write_json(args.out_dir, "retention", result)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["check"]["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
