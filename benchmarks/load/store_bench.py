"""Job store claim+complete throughput vs a minimal raw asyncpg SKIP LOCKED loop.

Run: ``python -m benchmarks.load.store_bench [--jobs 2000] [--workers 8] [--rounds 2]``

Each variant gets a fresh migrated database with the same jobs and the same
number of workers (one connection each); variants alternate within the run so
machine noise hits all of them. The raw loop does the same SQL work the store
does per job — claim (SKIP LOCKED, fence+1), attempt row, conditional
completion, result row, attempt close, outbox event — on the same migrated
schema, so the state-machine guard and audit triggers (and the outbox NOTIFY)
fire for both sides alike. What the ratio prices is the rest: the store's fair
claim CTE (per-tenant running counts, ranking and in-flight caps) against a
plain oldest-first pick, and the store's Python layers (a pool acquire per
call, named queries, lease and outcome objects).

``store_batch<N>`` claims N at a time and completes each in its own transaction
(``succeed``); ``store_settle_batch<N>`` claims N and completes them in one
transaction (``succeed_many``, each still under its own fence). The headline
ratio is ``ratio_settle_batch_vs_single``: both batched against one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.report import bar_plot, write_json
from benchmarks.settings import admin_dsn
from pipeline.database import connect, create_database, create_pool, drop_database, dsn_for
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore, Success
from pipeline.tenants import create_tenant

RAW_CLAIM = """
WITH candidate AS (
  SELECT id FROM extraction_jobs
  WHERE state IN ('READY', 'RETRY_SCHEDULED') AND available_at <= now() AND deadline_at > now()
  ORDER BY available_at, id
  FOR UPDATE SKIP LOCKED LIMIT 1
)
UPDATE extraction_jobs j
SET state='RUNNING', attempt=j.attempt+1, fence=j.fence+1,
    lease_until=now()+interval '90 seconds', lease_owner=$1
FROM candidate c WHERE j.id=c.id
RETURNING j.id, j.attempt, j.fence
"""
RAW_ATTEMPT = (
    "INSERT INTO job_attempts (job_id, fence, attempt, worker_id, started_at)"
    " VALUES ($1, $2, $3, $4, now())"
)
RAW_COMPLETE = """
UPDATE extraction_jobs SET state='SUCCEEDED', result_ref=$3, lease_until=NULL,
  lease_owner=NULL, finished_at=now()
WHERE id=$1 AND state='RUNNING' AND fence=$2 AND lease_until > now() RETURNING id
"""
RAW_RESULT = (
    "INSERT INTO extraction_results (job_id, fence, result, decision)"
    " VALUES ($1, $2, $3, 'SUCCEEDED')"
)
RAW_CLOSE = (
    "UPDATE job_attempts SET ended_at=now(), outcome='succeeded'"
    " WHERE job_id=$1 AND fence=$2 AND outcome='running'"
)
RAW_OUTBOX = (
    "INSERT INTO outbox_events (event_id, job_id, event_type, payload)"
    " VALUES ($1, $2, 'extraction.completed.v1', $3)"
)


async def fresh_db(jobs: int, tenants: int) -> str:
    name = f"fl_bench_{uuid.uuid4().hex[:8]}"
    dsn = await create_database(admin_dsn(), name)
    pool = await create_pool(dsn, max_size=4)
    store = JobStore(pool)
    async with pool.acquire() as c:
        ts = [await create_tenant(c, f"bench-{i}") for i in range(tenants)]
    for i in range(jobs):
        await store.accept(AcceptRequest(ts[i % tenants].id, f"k{i}", DocumentIn(f"invoice {i}")))
    await pool.close()
    return name


def dsn_of(name: str) -> str:
    return dsn_for(admin_dsn(), name)


async def drop_db(name: str) -> None:
    await drop_database(admin_dsn(), name)


Timed = tuple[int, float]
"""Jobs done and the seconds the workers took, connection set-up excluded."""


async def _timed(workers: list[Callable[[], Awaitable[int]]]) -> Timed:
    t0 = time.perf_counter()
    done = sum(await asyncio.gather(*(w() for w in workers)))
    return done, time.perf_counter() - t0


#: One store worker: claims with ``batch`` through its store until nothing is left.
StoreWorker = Callable[[JobStore, str, int], Awaitable[int]]


async def _store_workers(dsn: str, workers: int, batch: int, body: StoreWorker) -> Timed:
    """``workers`` workers on a one-connection pool each, opened before the clock starts."""
    pools = [await create_pool(dsn, min_size=1, max_size=1) for _ in range(workers)]

    def worker(n: int) -> Callable[[], Awaitable[int]]:
        return lambda: body(JobStore(pools[n]), f"w{n}", batch)

    try:
        return await _timed([worker(n) for n in range(workers)])
    finally:
        for pool in pools:
            await pool.close()


async def _settle_each(store: JobStore, worker: str, batch: int) -> int:
    done = 0
    while leases := await store.claim(worker, limit=batch):
        for lease in leases:
            await store.succeed(lease, result={"ok": True})
            done += 1
    return done


async def _settle_together(store: JobStore, worker: str, batch: int) -> int:
    done = 0
    while leases := await store.claim(worker, limit=batch):
        outcome = await store.succeed_many([Success(le, result={"ok": True}) for le in leases])
        assert not outcome.lost
        done += len(outcome.settled)
    return done


async def run_store(dsn: str, workers: int, batch: int) -> Timed:
    """Claim ``batch`` at a time and settle each in its own transaction (``succeed``)."""
    return await _store_workers(dsn, workers, batch, _settle_each)


async def run_store_settle_batch(dsn: str, workers: int, batch: int) -> Timed:
    """Claim ``batch`` at a time and settle them together (``succeed_many``)."""
    return await _store_workers(dsn, workers, batch, _settle_together)


async def run_raw(dsn: str, workers: int) -> Timed:
    conns = [await connect(dsn) for _ in range(workers)]
    try:
        return await _timed([_raw_worker(conns[n], n) for n in range(workers)])
    finally:
        for conn in conns:
            await conn.close()


def _raw_worker(conn: Any, n: int) -> Callable[[], Awaitable[int]]:
    async def worker() -> int:
        done = 0
        while True:
            async with conn.transaction():
                row = await conn.fetchrow(RAW_CLAIM, f"w{n}")
                if row is None:
                    break
                await conn.execute(RAW_ATTEMPT, row["id"], row["fence"], row["attempt"], f"w{n}")
            async with conn.transaction():
                ok = await conn.fetchval(RAW_COMPLETE, row["id"], row["fence"], "r")
                assert ok is not None
                await conn.execute(RAW_RESULT, row["id"], row["fence"], {"ok": True})
                await conn.execute(RAW_CLOSE, row["id"], row["fence"])
                await conn.execute(RAW_OUTBOX, uuid.uuid4(), row["id"], {"job_id": str(row["id"])})
            done += 1
        return done

    return worker


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    variants: dict[str, Callable[[str], Awaitable[Timed]]] = {
        "raw_skip_locked": lambda dsn: run_raw(dsn, args.workers),
        "store_single": lambda dsn: run_store(dsn, args.workers, 1),
        f"store_batch{args.batch}": lambda dsn: run_store(dsn, args.workers, args.batch),
        f"store_settle_batch{args.batch}": lambda dsn: run_store_settle_batch(
            dsn, args.workers, args.batch
        ),
    }
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for rnd in range(args.rounds):
        for name, fn in variants.items():
            db = await fresh_db(args.jobs, args.tenants)
            dsn = dsn_of(db)
            done, elapsed = await fn(dsn)
            await drop_db(db)
            assert done == args.jobs, (name, done)
            rates[name].append(done / elapsed)
            print(f"round {rnd + 1} {name:>16}: {done / elapsed:8.1f} jobs/s", flush=True)
    best = {k: max(v) for k, v in rates.items()}
    single = best["store_single"]
    batch = best[f"store_batch{args.batch}"]
    settle_batch = best[f"store_settle_batch{args.batch}"]
    result = {
        "params": vars(args),
        "jobs_per_second": rates,
        "best": best,
        "ratio_store_single_vs_raw": single / best["raw_skip_locked"],
        "ratio_store_batch_vs_raw": batch / best["raw_skip_locked"],
        "ratio_batch_vs_single": batch / single,
        "ratio_settle_batch_vs_single": settle_batch / single,
        "ratio_settle_batch_vs_claim_batch": settle_batch / batch,
    }
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--tenants", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("results/store"))
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    print(json.dumps({k: v for k, v in result.items() if k.startswith("ratio")}, indent=2))
    write_json(args.out, "store_bench", result)
    labels = list(result["best"])
    bar_plot(
        args.out,
        "store_bench",
        "claim+complete throughput (best of rounds)",
        labels,
        [result["best"][k] for k in labels],
        "jobs/s",
    )
    print(f"wrote {args.out}/store_bench.json and .png")


if __name__ == "__main__":
    main()
