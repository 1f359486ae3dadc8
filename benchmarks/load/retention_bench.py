"""Retention over many settled jobs: rows removed per second, and what the pass does
to claim latency while it runs.

Run: ``python -m benchmarks.load.retention_bench [--jobs 200000] [--ready 20000]
[--batch 500] [--out-dir reports]`` (writes ``retention.json`` there)

A fresh migrated database gets ``--jobs`` SUCCEEDED jobs finished 400 days ago
(so both the content and the audit stage are due), each with a pasted document of
about 1 KB, a result of about 1 KB and its ``job_events`` row (the audit trigger
writes it), generated in bulk by SQL; and ``--ready`` READY jobs for the claim
probe. One claimer calls :meth:`~pipeline.jobs.JobStore.claim` (one job, its own
connection) every ``--probe-interval`` seconds and times each claim:

1. **quiet**: ``--quiet-seconds`` of claims with nothing else running;
2. **during**: claims for as long as one :func:`~pipeline.jobs.run_retention` pass
   over every tenant runs, on its own connection.

The JSON report gives the pass's rows removed per second, its batches, its longest
batch, and claim p50/p99 quiet and during, with the ratio of the p99s (one run,
side by side). The issue's target is claim p99 during ≤ 1.2 × quiet p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks.report import write_json
from benchmarks.settings import admin_dsn
from pipeline.database import create_database, create_pool, drop_database
from pipeline.jobs import JobStore, RetentionConfig, run_retention
from pipeline.settings import Settings
from pipeline.tenants import create_tenant

#: N documents, settled jobs and results finished 400 days ago, in three statements.
GENERATE = (
    """INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size)
       SELECT md5('d' || g)::uuid, $1::uuid, encode(sha256(('doc' || g)::bytea), 'hex'), 'v1',
              'INVOICE ' || g || ' IBAN DE89370400440532013000 ' || repeat('line item ', 100),
              1024
       FROM generate_series(1, $2::int) g""",
    """INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash, document_id,
              object_version, state, deadline_at, finished_at, result_ref, attempt, fence,
              created_at)
       SELECT md5('j' || g)::uuid, $1::uuid, 'settled-' || g, 'h', md5('d' || g)::uuid, 'v1',
              'SUCCEEDED', now() - interval '399 days', now() - interval '400 days'
                + g * interval '1 millisecond', 'extraction_results/x', 1, 1,
              now() - interval '401 days'
       FROM generate_series(1, $2::int) g""",
    """INSERT INTO extraction_results (job_id, fence, result, validation, decision)
       SELECT md5('j' || g)::uuid, 1 + 0 * length($1::uuid::text),
              jsonb_build_object('invoice_number', 'INV-' || g, 'notes',
                                 repeat('extracted value ', 60)),
              '{"reasons": []}'::jsonb, 'SUCCEEDED'
       FROM generate_series(1, $2::int) g""",
)
READY = """INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size)
VALUES ($2, $1, encode(sha256('ready'::bytea), 'hex'), 'v1', 'INVOICE ready', 13)"""
READY_JOBS = """INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash,
       document_id, object_version, state, deadline_at)
SELECT gen_random_uuid(), $1, 'ready-' || g, 'h', $3, 'v1', 'READY', now() + interval '7 days'
FROM generate_series(1, $2::int) g"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def _latency(values: list[float]) -> dict[str, Any]:
    return {
        "claims": len(values),
        "p50_ms": round(_pct(values, 0.50), 3),
        "p99_ms": round(_pct(values, 0.99), 3),
        "mean_ms": round(statistics.fmean(values) * 1000.0, 3) if values else None,
    }


async def _generate(pool: asyncpg.Pool, jobs: int, ready: int) -> tuple[uuid.UUID, float]:
    started = time.perf_counter()
    async with pool.acquire() as conn:
        settled = await create_tenant(conn, "retention-settled", max_in_flight=100_000)
        live = await create_tenant(conn, "retention-live", max_in_flight=100_000)
        for sql in GENERATE:
            await conn.execute(sql, settled.id, jobs)
        doc = uuid.uuid4()
        await conn.execute(READY, live.id, doc)
        await conn.execute(READY_JOBS, live.id, ready, doc)
        await conn.execute("VACUUM ANALYZE")
    return settled.id, time.perf_counter() - started


async def _probe(store: JobStore, until: asyncio.Event, interval: float) -> list[float]:
    """Claim one job every ``interval`` seconds until ``until`` is set; each claim's time."""
    times: list[float] = []
    while not until.is_set():
        t0 = time.perf_counter()
        leases = await store.claim("retention-probe")
        times.append(time.perf_counter() - t0)
        if not leases:
            raise RuntimeError("the probe ran out of READY jobs: raise --ready")
        try:
            await asyncio.wait_for(until.wait(), interval)
        except TimeoutError:
            pass
    return times


async def run(args: argparse.Namespace) -> dict[str, Any]:
    name = f"fl_retention_{uuid.uuid4().hex[:8]}"
    dsn = await create_database(admin_dsn(), name)
    try:
        pool = await create_pool(dsn, min_size=2, max_size=4)
        try:
            _, generate_seconds = await _generate(pool, args.jobs, args.ready)
            store = JobStore(pool, Settings(database_url=dsn, lease_seconds=3600))
            await store.claim("warm-up")  # plan and cache the claim statement first

            quiet_done = asyncio.Event()
            quiet_task = asyncio.create_task(_probe(store, quiet_done, args.probe_interval))
            await asyncio.sleep(args.quiet_seconds)
            quiet_done.set()
            quiet = await quiet_task

            during_done = asyncio.Event()
            during_task = asyncio.create_task(_probe(store, during_done, args.probe_interval))
            config = RetentionConfig(batch=args.batch)
            report = await run_retention(pool, config)
            during_done.set()
            during = await during_task
        finally:
            await pool.close()
    finally:
        await drop_database(admin_dsn(), name)
    removed = report.as_dict()
    quiet_l, during_l = _latency(quiet), _latency(during)
    return {
        "jobs": args.jobs,
        "batch": args.batch,
        "generate_seconds": round(generate_seconds, 1),
        "pass": removed,
        "rows_per_second": round(report.rows / report.seconds, 1),
        "jobs_per_second": round(report.content_jobs / report.seconds, 1),
        "claim_quiet": quiet_l,
        "claim_during_pass": during_l,
        "claim_p99_ratio_during_vs_quiet": round(during_l["p99_ms"] / quiet_l["p99_ms"], 3),
        "claim_p50_ratio_during_vs_quiet": round(during_l["p50_ms"] / quiet_l["p50_ms"], 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--ready", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--probe-interval", type=float, default=0.01)
    p.add_argument("--quiet-seconds", type=float, default=30.0)
    p.add_argument("--out-dir", type=Path, default=Path("reports"))
    args = p.parse_args()
    result = asyncio.run(run(args))
    write_json(args.out_dir, "retention", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
