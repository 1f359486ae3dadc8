"""The cost of sealing invoice text at rest: AES-GCM alone, and with the data-key read.

Run: ``python -m benchmarks.load.sealing_bench [--n 1000]``

A generated invoice's text (and one twenty times as long) is sealed and opened with
:mod:`pipeline.envelope`'s AES-256-GCM, ``--n`` times each (microseconds per call).
Then, on a fresh migrated database with one tenant, :class:`pipeline.data_keys.DataKeys`
seals and opens the invoice text as the intake, the document stage and the console
do, each call reading the tenant's data key (one primary-key lookup; the unwrapped key
is cached): p50 and p99 per call, against a bare ``SELECT 1`` round trip on the same
connection. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from benchmarks.invoices.generator import generate_invoice
from benchmarks.load.store_bench import drop_db, dsn_of, fresh_db
from pipeline.data_keys import DataKeys, document_subject
from pipeline.database import connect
from pipeline.envelope import KEY_BYTES, LocalKeyProvider, open_sealed, seal


def _us_per_call(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


async def _percentiles(call: Callable[[], Awaitable[object]], n: int) -> dict[str, float]:
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        took.append(time.perf_counter() - t0)
    took.sort()
    return {"p50_us": took[n // 2] * 1e6, "p99_us": took[min(n - 1, n * 99 // 100)] * 1e6}


async def main_async(n: int) -> dict[str, Any]:
    text = generate_invoice(3, languages=("en",), max_line_items=8).ocr_text
    key = bytes(range(KEY_BYTES))
    out: dict[str, Any] = {"n": n, "text_bytes": len(text.encode())}
    for name, body in (("invoice", text), ("invoice_x20", "\n".join([text] * 20))):
        data = body.encode()
        blob = seal(key, data, b"aad")
        out[f"aes_gcm_{name}"] = {
            "bytes": len(data),
            "seal_us": _us_per_call(partial(seal, key, data, b"aad"), n),
            "open_us": _us_per_call(partial(open_sealed, key, blob, b"aad"), n),
        }
    db = await fresh_db(0, 1)
    try:
        conn = await connect(dsn_of(db))
        try:
            tenant = await conn.fetchval("SELECT id FROM tenants LIMIT 1")
            keys = DataKeys(LocalKeyProvider([key]))
            subject = document_subject("ab" * 32)
            sealed = await keys.seal_text(conn, tenant, text, subject)
            out["stored_chars"] = len(sealed)
            out["seal_text"] = await _percentiles(
                lambda: keys.seal_text(conn, tenant, text, subject), n
            )
            out["open_text"] = await _percentiles(
                lambda: keys.open_text(conn, tenant, sealed, subject), n
            )
            out["select_1"] = await _percentiles(lambda: conn.fetchval("SELECT 1"), n)
        finally:
            await conn.close()
    finally:
        await drop_db(db)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000, help="calls per measurement")
    args = p.parse_args()
    print(json.dumps(asyncio.run(main_async(args.n)), indent=2))


if __name__ == "__main__":
    main()
