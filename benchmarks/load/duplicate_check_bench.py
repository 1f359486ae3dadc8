"""The cost of duplicate protection per invoice: off, exact only, exact + possible duplicates.

Run: ``python -m benchmarks.load.duplicate_check_bench [--jobs 1000] [--workers 4] [--rounds 2]``

Each variant gets a fresh migrated database with the same jobs (``store_bench``'s set-up)
and settles them with invoice results, every one a distinct supplier invoice (so the
checks claim keys and find nothing held, the common case), one at a time (``succeed``)
and in batches (``succeed_many``). Variants alternate within a round so machine noise
hits all of them. ``off`` has no claim at all, ``exact`` claims the invoice identity
(``invoice_identities``), ``near`` also the two keyed near keys
(``invoice_near_keys``). The report gives throughput, the ratios against ``exact``
and the added milliseconds per invoice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.load.store_bench import drop_db, dsn_of, fresh_db
from benchmarks.report import bar_plot, write_json
from pipeline.database import create_pool
from pipeline.jobs import JobStore, Lease, Success
from pipeline.settings import Settings

VARIANTS: dict[str, dict[str, bool]] = {
    "off": {"duplicate_invoice_check": False},
    "exact": {"duplicate_invoice_check": True, "possible_duplicate_check": False},
    "near": {"duplicate_invoice_check": True, "possible_duplicate_check": True},
}


def invoice_of(lease: Lease) -> dict[str, Any]:
    """A distinct supplier invoice per job (number and total from its id)."""
    h = lease.job_id.hex
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
    print(json.dumps({k: v for k, v in result.items() if k != "jobs_per_second"}, indent=2))
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
