"""The cost of duplicate protection per invoice: off, exact only, exact + possible duplicates.

Run: ``python -m benchmarks.load.duplicate_check_bench [--jobs 1000] [--workers 4] [--rounds 2]``

Each variant gets a fresh migrated database with the same jobs (``store_bench``'s set-up)
and settles them with invoice results, every one a distinct supplier invoice (so the
checks claim keys and find nothing held, the common case), one at a time (``succeed``)
and in batches (``succeed_many``). Variants alternate within a round so machine noise
hits all of them. ``off`` has no claim at all, ``exact`` claims the invoice identity
(``invoice_identities``), ``near`` also the two keyed near keys
(``invoice_near_keys``). The report gives throughput, the ratios against ``exact``
(best of rounds, and per round side by side) and the added milliseconds per invoice;
then the claims alone (:func:`claim_costs`): median microseconds per invoice of the
exact claim, of the near-key claim and of the version claim (``invoice_versions``,
which ``exact`` and ``near`` run first), one invoice and ``--batch`` at a time.
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

from benchmarks.load.store_bench import drop_db, dsn_of, fresh_db
from benchmarks.report import bar_plot, write_json
from pipeline.database import create_pool
from pipeline.jobs import JobStore, Lease, Success
from pipeline.jobs.duplicates import claim_invoices
from pipeline.jobs.near_duplicates import claim_near_keys, near_key_secret
from pipeline.jobs.versions import claim_versions
from pipeline.settings import Settings

VARIANTS: dict[str, dict[str, bool]] = {
    "off": {"duplicate_invoice_check": False},
    "exact": {"duplicate_invoice_check": True, "possible_duplicate_check": False},
    "near": {"duplicate_invoice_check": True, "possible_duplicate_check": True},
}


def invoice_of(lease: Lease) -> dict[str, Any]:
    """A distinct supplier invoice per job (number and total from its id)."""
    return invoice_of_id(lease.job_id)


def invoice_of_id(job_id: uuid.UUID) -> dict[str, Any]:
    h = job_id.hex
    return {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": "DE123456789"}},
        "invoice_number": {"value": f"INV-{h[:8]}"},
        "gross_total": {"value": f"{int(h[8:12], 16)}.{int(h[12:14], 16) % 100:02d}"},
        "currency": {"value": "EUR"},
        "issue_date": {"value": "2026-11-02"},
    }


async def _worker(store: JobStore, name: str, batch: int, together: bool) -> int:
    done = 0
    while leases := await store.claim(name, limit=batch):
        if together:
            out = await store.succeed_many([Success(le, result=invoice_of(le)) for le in leases])
            assert not out.lost
            done += sum(s.state.value == "SUCCEEDED" for s in out.settled)
        else:
            for le in leases:
                settled = await store.succeed(le, result=invoice_of(le))
                done += settled.state.value == "SUCCEEDED"
    return done


async def run(dsn: str, settings: Settings, workers: int, batch: int, together: bool) -> float:
    """Jobs per second of ``workers`` workers (a one-connection pool each)."""
    pools = [await create_pool(dsn, min_size=1, max_size=1) for _ in range(workers)]
    stores = [JobStore(p, settings) for p in pools]
    try:
        t0 = time.perf_counter()
        done = sum(
            await asyncio.gather(
                *(_worker(s, f"w{n}", batch, together) for n, s in enumerate(stores))
            )
        )
        elapsed = time.perf_counter() - t0
    finally:
        for p in pools:
            await p.close()
    return done / elapsed


async def claim_costs(jobs: int, tenants: int, batch: int) -> dict[str, float]:
    """The claims alone, per invoice: median microseconds of the exact claim, of the
    near-key claim and of the version claim, each in its own transaction per chunk of
    ``batch`` invoices (the settle statement, identical with or without the checks,
    left out). Medians over
    chunks, so a burst of load from elsewhere on the machine moves them little."""
    db = await fresh_db(jobs, tenants)
    dsn = dsn_of(db)
    pool = await create_pool(dsn, min_size=1, max_size=1)
    exact_us: list[float] = []
    near_us: list[float] = []
    version_us: list[float] = []
    try:
        async with pool.acquire() as conn:
            rows = await conn.fetch("SELECT id, tenant_id FROM extraction_jobs ORDER BY id")
            secret = await near_key_secret(conn, Settings(database_url=dsn))
            for i in range(0, len(rows), batch):
                chunk = rows[i : i + batch]
                claims = [(r["tenant_id"], r["id"], invoice_of_id(r["id"])) for r in chunk]
                t0 = time.perf_counter()
                async with conn.transaction():
                    await claim_invoices(conn, secret, claims)
                t1 = time.perf_counter()
                async with conn.transaction():
                    await claim_near_keys(conn, secret, claims)
                t2 = time.perf_counter()
                async with conn.transaction():
                    await claim_versions(conn, secret, claims)
                t3 = time.perf_counter()
                exact_us.append((t1 - t0) * 1e6 / len(chunk))
                near_us.append((t2 - t1) * 1e6 / len(chunk))
                version_us.append((t3 - t2) * 1e6 / len(chunk))
    finally:
        await pool.close()
        await drop_db(db)
    return {
        "exact_claim_us_per_invoice": statistics.median(exact_us),
        "near_claim_us_per_invoice": statistics.median(near_us),
        "version_claim_us_per_invoice": statistics.median(version_us),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    modes = {"single": (1, False), f"settle_batch{args.batch}": (args.batch, True)}
    rates: dict[str, list[float]] = {f"{m}/{v}": [] for m in modes for v in VARIANTS}
    for rnd in range(args.rounds):
        for mode, (batch, together) in modes.items():
            for variant, flags in VARIANTS.items():
                db = await fresh_db(args.jobs, args.tenants)
                dsn = dsn_of(db)
                try:
                    settings = Settings(database_url=dsn, **flags)  # type: ignore[arg-type]
                    rate = await run(dsn, settings, args.workers, batch, together)
                finally:
                    await drop_db(db)
                rates[f"{mode}/{variant}"].append(rate)
                print(f"round {rnd + 1} {mode}/{variant:>5}: {rate:8.1f} jobs/s", flush=True)
    best = {k: max(v) for k, v in rates.items()}
    result: dict[str, Any] = {"params": vars(args), "jobs_per_second": rates, "best": best}
    # Side by side within each round (the variants of one mode run back to back).
    for mode in modes:
        result[f"{mode}_near_vs_exact_per_round"] = [
            n / e for n, e in zip(rates[f"{mode}/near"], rates[f"{mode}/exact"], strict=True)
        ]
    for size in (1, args.batch):
        costs = [await claim_costs(args.jobs, args.tenants, size) for _ in range(args.rounds)]
        result[f"claims_batch{size}"] = {
            k: statistics.median(c[k] for c in costs) for k in costs[0]
        }
        print(f"claims in chunks of {size}: {result[f'claims_batch{size}']}", flush=True)
    for mode in modes:
        off, exact, near = (best[f"{mode}/{v}"] for v in VARIANTS)
        result[f"{mode}_ratio_near_vs_exact"] = near / exact
        result[f"{mode}_ratio_near_vs_off"] = near / off
        result[f"{mode}_ratio_exact_vs_off"] = exact / off
        # Wall time per invoice across the workers (1 / rate), the added part in ms.
        result[f"{mode}_added_ms_per_invoice_near_vs_exact"] = 1000 * (1 / near - 1 / exact)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--tenants", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("results/duplicates"))
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    shown = {k: v for k, v in result.items() if k != "jobs_per_second"}
    print(json.dumps(shown, indent=2, default=str))
    write_json(args.out, "duplicate_check_bench", result)
    labels = list(result["best"])
    bar_plot(
        args.out,
        "duplicate_check_bench",
        "settle throughput by duplicate protection (best of rounds)",
        labels,
        [result["best"][k] for k in labels],
        "jobs/s",
    )
    print(f"wrote {args.out}/duplicate_check_bench.json and .png")


if __name__ == "__main__":
    main()
