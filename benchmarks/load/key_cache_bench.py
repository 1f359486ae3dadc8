"""The accept path with and without the API-key cache, side by side in one process.

Run: ``python -m benchmarks.load.key_cache_bench [--blocks 10] [--requests 50] [--concurrency 4]``

Two copies of the Fenceline app (``pipeline.api.app``) run in this process on one
migrated database, each with its lifespan (so the cache's LISTEN connection is up):
``cache`` with the default ``api_key_cache_size``, ``nocache`` with 0 (every request
reads and verifies its key in PostgreSQL, as before issue 21). Blocks of
``--requests`` ``POST /v1/extraction-jobs`` (unique document and Idempotency-Key,
``--concurrency`` in flight, in-process ASGI client, no sockets) alternate between
the two, so drift in the machine's load hits both alike; the headline is the ratio
of their median per-request times. Results: ``results/intake/key_cache_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from benchmarks.report import machine, percentile, write_json
from benchmarks.settings import admin_dsn
from pipeline.api.app import create_app
from pipeline.database import connect, create_database, drop_database
from pipeline.settings import Settings
from pipeline.tenants import create_api_key, create_tenant

OUT = Path(__file__).resolve().parents[2] / "results" / "intake"


async def _block(
    client: httpx.AsyncClient, key: str, requests: int, concurrency: int
) -> list[float]:
    latencies: list[float] = []
    todo = iter(range(requests))

    async def worker() -> None:
        for _ in todo:
            body = {"document": {"text": f"INVOICE {uuid.uuid4().hex} total 10.00 EUR"}}
            headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": uuid.uuid4().hex}
            started = time.perf_counter()
            r = await client.post("/v1/extraction-jobs", json=body, headers=headers)
            latencies.append(time.perf_counter() - started)
            if r.status_code != 202:
                raise AssertionError(f"{r.status_code}: {r.text}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    name = f"fl_key_cache_bench_{uuid.uuid4().hex[:8]}"
    dsn = await create_database(admin_dsn(), name)
    try:
        conn = await connect(dsn)
        try:
            tenant = await create_tenant(conn, f"bench-{uuid.uuid4().hex[:6]}")
            key = (await create_api_key(conn, tenant.id))[1]
        finally:
            await conn.close()
        apps: dict[str, FastAPI] = {
            "cache": create_app(Settings(database_url=dsn)),
            "nocache": create_app(Settings(database_url=dsn, api_key_cache_size=0)),
        }
        times: dict[str, list[float]] = {n: [] for n in apps}
        block_s: dict[str, list[float]] = {n: [] for n in apps}
        async with (
            apps["cache"].router.lifespan_context(apps["cache"]),
            apps["nocache"].router.lifespan_context(apps["nocache"]),
        ):
            clients = {
                n: httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://b")
                for n, a in apps.items()
            }
            for n in apps:  # warm-up: pools, prepared statements, the cache filled
                await _block(clients[n], key, args.requests, args.concurrency)
            for b in range(args.blocks):
                order = ["cache", "nocache"] if b % 2 == 0 else ["nocache", "cache"]
                for n in order:
                    started = time.perf_counter()
                    times[n] += await _block(clients[n], key, args.requests, args.concurrency)
                    block_s[n].append(time.perf_counter() - started)
            for c in clients.values():
                await c.aclose()
            cache = apps["cache"].state.fenceline.key_cache
            hits, misses = (cache.hits, cache.misses) if cache is not None else (0, 0)
    finally:
        await drop_database(admin_dsn(), name)
    results = {
        n: {
            "requests": len(times[n]),
            "p50_ms": percentile(times[n], 50) * 1000,
            "p99_ms": percentile(times[n], 99) * 1000,
            "median_block_s": statistics.median(block_s[n]),
            "accepts_per_s": args.requests / statistics.median(block_s[n]),
        }
        for n in apps
    }
    ratios = {
        "p50 cache/nocache": results["cache"]["p50_ms"] / results["nocache"]["p50_ms"],
        "throughput cache/nocache": results["cache"]["accepts_per_s"]
        / results["nocache"]["accepts_per_s"],
    }
    for n, r in results.items():
        print(
            f"{n:8s} {r['accepts_per_s']:7.1f} accepts/s  p50 {r['p50_ms']:6.2f} ms  "
            f"p99 {r['p99_ms']:6.2f} ms"
        )
    for k, v in ratios.items():
        print(f"{k:26s} {v:5.2f}")
    print(f"cache hits {hits}, misses {misses}")
    report = {
        "benchmark": "key_cache",
        "params": vars(args),
        "machine": machine(),
        "results": results,
        "ratios": ratios,
        "cache": {"hits": hits, "misses": misses},
    }
    print(write_json(OUT, "key_cache_bench", report))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.key_cache_bench")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
