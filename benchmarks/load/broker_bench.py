"""Broker path: relay confirmed-publish rate and relay → inbox latency vs intake rate.

Run: ``python -m benchmarks.load.broker_bench [--rates 50,100,200,400] [--seconds 6]
[--drain 5000] [--out results/broker]``

One run, one fresh migrated database, one topology on the local RabbitMQ, the
real services (``OutboxRelay`` with LISTEN wake-ups, ``InboxConsumer``):

1. **Drain**: ``--drain`` committed outbox events are published from a standing
   backlog, so the relay's confirmed-publish rate is measured without intake
   in the way; then the ingress consumer ingests the same backlog.
2. **Open-loop intake** at each rate of ``--rates`` for ``--seconds``: requests
   are started on a fixed schedule whether or not earlier ones finished (an
   open loop shows backlog growth a closed loop hides). Per rate it reports the
   achieved intake rate, the relay's confirmed-publish rate over the same
   window, and p50/p99 of two latencies:

   * intake → inbox: ``execution_inbox.received_at − outbox_events.created_at``
     (one clock: PostgreSQL's);
   * relay → inbox: the relay's send time (``x-fenceline-sent-at-us``) to the
     inbox commit (one machine's clock here).

Writes ``broker_bench.json`` and ``broker_bench.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import asyncpg
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from prometheus_client import CollectorRegistry

from benchmarks.report import percentile, write_json
from benchmarks.settings import BenchSettings, admin_dsn
from pipeline.database import create_database, create_pool, drop_database
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.messaging import (
    BrokerConfig,
    BrokerMetrics,
    InboxConsumer,
    IngestResult,
    OutboxRelay,
    RelayConfig,
    Settlement,
    declare_topology,
)
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import create_tenant


async def fresh_database() -> tuple[str, str]:
    name = f"fl_broker_bench_{uuid.uuid4().hex[:8]}"
    return name, await create_database(admin_dsn(), name)


def delete_topology(cfg: BrokerConfig) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(cfg.url))
    ch = conn.channel()
    for queue in (cfg.work_queue, cfg.dead_letter_queue):
        ch.queue_delete(queue)
    for x in (cfg.exchange, cfg.dead_letter_exchange):
        ch.exchange_delete(x)
    conn.close()


async def wait_ingested(pool: asyncpg.Pool, tenant: uuid.UUID, n: int, timeout: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        async with pool.acquire() as conn:
            if await conn.fetchval(q("bench_broker_inbox_count"), tenant) >= n:
                return time.perf_counter() - start
        await asyncio.sleep(0.05)
    raise TimeoutError(f"only part of {n} events reached the inbox in {timeout}s")


async def drain_phase(pool: asyncpg.Pool, settings: Settings, n: int) -> dict[str, Any]:
    """Standing backlog: pure relay publish rate, then pure inbox ingest rate."""
    async with pool.acquire() as conn:
        tenant = (await create_tenant(conn, f"drain-{uuid.uuid4().hex[:6]}")).id
        await conn.execute(q("bench_broker_bulk_jobs"), tenant, n)
        await conn.execute(q("bench_broker_bulk_events"), tenant)
    relay = OutboxRelay(
        pool,
        settings,
        config=RelayConfig(batch_size=500, listen=False),
        metrics=BrokerMetrics(CollectorRegistry()),
    )
    start = time.perf_counter()
    published = 0
    while (report := await relay.run_once()).claimed:
        published += report.published
    relay_seconds = time.perf_counter() - start
    await relay.stop()
    inbox = InboxConsumer(pool, settings, metrics=BrokerMetrics(CollectorRegistry()))
    await inbox.start()
    ingest_seconds = await wait_ingested(pool, tenant, n, 300)
    await inbox.stop()
    return {
        "events": n,
        "published": published,
        "relay_seconds": relay_seconds,
        "relay_confirmed_per_second": published / relay_seconds,
        "inbox_seconds": ingest_seconds,
        "inbox_per_second": n / ingest_seconds,
    }


async def _open_loop(dsn: str, tenant: uuid.UUID, rate: float, seconds: float) -> tuple[int, float]:
    pool = await create_pool(dsn, min_size=4, max_size=16)
    store = JobStore(pool)
    accepted = 0

    async def one(i: int) -> None:
        nonlocal accepted
        await store.accept(
            AcceptRequest(tenant, f"k-{i}", DocumentIn(f"INVOICE {tenant} #{i} total 10.00 EUR"))
        )
        accepted += 1

    start = time.perf_counter()
    tasks = []
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    await pool.close()
    return accepted, elapsed


def _intake_process(dsn: str, tenant: str, rate: float, seconds: float, out: Connection) -> None:
    """The intake service in its own process (its own interpreter and event loop)."""
    out.send(asyncio.run(_open_loop(dsn, uuid.UUID(tenant), rate, seconds)))
    out.close()


async def intake_phase(
    pool: asyncpg.Pool, dsn: str, rate: float, seconds: float, lags: list[float]
) -> dict[str, Any]:
    async with pool.acquire() as conn:
        tenant = (await create_tenant(conn, f"rate-{int(rate)}-{uuid.uuid4().hex[:6]}")).id
    total = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_intake_process, args=(dsn, str(tenant), rate, seconds, send))
    lags.clear()
    proc.start()
    accepted, intake_seconds = await asyncio.to_thread(receive.recv)
    await asyncio.to_thread(proc.join)
    await wait_ingested(pool, tenant, total, 120)
    async with pool.acquire() as conn:
        window = await conn.fetchrow(q("bench_broker_publish_window"), tenant)
        latencies = [
            float(r["seconds"]) for r in await conn.fetch(q("bench_broker_latencies"), tenant)
        ]
    window_seconds = float(window["window_seconds"])
    relay_lags = list(lags)
    return {
        "target_intake_per_second": rate,
        "accepted": accepted,
        "intake_per_second": accepted / intake_seconds,
        "relay_confirmed_per_second": window["in_window"] / window_seconds,
        "relay_catch_up_seconds": max(0.0, float(window["catch_up_seconds"] or 0)),
        "intake_to_inbox_p50_ms": 1000 * percentile(latencies, 50),
        "intake_to_inbox_p99_ms": 1000 * percentile(latencies, 99),
        "relay_to_inbox_p50_ms": 1000 * percentile(relay_lags, 50),
        "relay_to_inbox_p99_ms": 1000 * percentile(relay_lags, 99),
        "relay_to_inbox_samples": len(relay_lags),
    }


def plot(out: Path, drain: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    rates = [r["target_intake_per_second"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(rates, [r["intake_per_second"] for r in rows], "o-", label="intake (accepted/s)")
    a.plot(rates, [r["relay_confirmed_per_second"] for r in rows], "s-", label="relay confirmed/s")
    a.axhline(drain["relay_confirmed_per_second"], ls="--", c="gray", label="relay drain capacity")
    a.plot(rates, rates, ":", c="black", lw=0.8, label="target")
    a.set_xlabel("target intake rate (jobs/s)")
    a.set_ylabel("events/s")
    a.set_yscale("log")
    a.set_title("Throughput vs intake rate")
    a.legend(fontsize=8)
    b.plot(rates, [r["relay_to_inbox_p99_ms"] for r in rows], "o-", label="relay→inbox p99")
    b.plot(rates, [r["relay_to_inbox_p50_ms"] for r in rows], "o--", label="relay→inbox p50")
    b.plot(rates, [r["intake_to_inbox_p99_ms"] for r in rows], "s-", label="intake→inbox p99")
    b.plot(rates, [r["intake_to_inbox_p50_ms"] for r in rows], "s--", label="intake→inbox p50")
    b.set_xlabel("target intake rate (jobs/s)")
    b.set_ylabel("ms")
    b.set_yscale("log")
    b.set_title("Latency to the durable inbox")
    b.legend(fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "broker_bench.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    name, dsn = await fresh_database()
    tag = f"flbench.{uuid.uuid4().hex[:6]}"
    settings = Settings(
        database_url=dsn,
        amqp_url=BenchSettings().bench_amqp_url,
        amqp_exchange=f"{tag}.x",
        amqp_work_queue=f"{tag}.work",
        amqp_dead_letter_exchange=f"{tag}.dlx",
        amqp_dead_letter_queue=f"{tag}.dlq",
    )
    cfg = BrokerConfig.from_settings(settings)
    assert cfg is not None
    await asyncio.to_thread(declare_topology, cfg)
    # One pool per service, as separate deployments would have: an intake burst
    # queueing for connections must not starve the relay or the inbox.
    pool = await create_pool(dsn, min_size=4, max_size=16)
    relay_pool = await create_pool(dsn, min_size=2, max_size=4)
    inbox_pool = await create_pool(dsn, min_size=2, max_size=8)
    try:
        drain = await drain_phase(pool, settings, args.drain)
        print(
            f"drain: {drain['published']} events, relay {drain['relay_confirmed_per_second']:.0f} "
            f"confirmed/s, inbox {drain['inbox_per_second']:.0f}/s"
        )
        relay = OutboxRelay(relay_pool, settings, metrics=BrokerMetrics(CollectorRegistry()))
        inbox = InboxConsumer(inbox_pool, settings, metrics=BrokerMetrics(CollectorRegistry()))
        lags: list[float] = []

        async def record(_c: None, settled: Settlement) -> None:
            result = settled.disposition.result
            if isinstance(result, IngestResult) and result.lag_seconds is not None:
                lags.append(result.lag_seconds)

        inbox.consumer.on_settled.add(record)
        await relay.start()
        await inbox.start()
        rows = []
        print(
            f"{'target/s':>8} {'intake/s':>9} {'relay/s':>8} {'catch-up s':>10} "
            f"{'relay→inbox p50/p99 ms':>24} {'intake→inbox p50/p99 ms':>25}"
        )
        for rate in args.rates:
            row = await intake_phase(pool, dsn, rate, args.seconds, lags)
            rows.append(row)
            print(
                f"{rate:>8.0f} {row['intake_per_second']:>9.1f} "
                f"{row['relay_confirmed_per_second']:>8.1f} {row['relay_catch_up_seconds']:>10.2f} "
                f"{row['relay_to_inbox_p50_ms']:>11.1f} / {row['relay_to_inbox_p99_ms']:>9.1f} "
                f"{row['intake_to_inbox_p50_ms']:>12.1f} / {row['intake_to_inbox_p99_ms']:>9.1f}"
            )
        await inbox.stop()
        await relay.stop()
    finally:
        for p in (pool, relay_pool, inbox_pool):
            await p.close()
        await asyncio.to_thread(delete_topology, cfg)
        await drop_database(admin_dsn(), name)
    return {
        "params": {"rates": args.rates, "seconds": args.seconds, "drain": args.drain},
        "services": {
            "process": "intake in its own process (open loop); relay and inbox in another, "
            "one pool each",
            "relay_batch_size": RelayConfig().batch_size,
            "prefetch": settings.amqp_prefetch,
            "queue": "quorum, at-least-once DLX, reject-publish",
            "broker": "RabbitMQ 3.10 on loopback, persistent messages, publisher confirms",
        },
        "drain": drain,
        "open_loop": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--rates", type=lambda s: [float(x) for x in s.split(",")], default=[50, 100, 200, 400]
    )
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--drain", type=int, default=5000)
    p.add_argument("--out", type=Path, default=Path("results/broker"))
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    data = asyncio.run(main_async(args))
    json_path = write_json(args.out, "broker_bench", data)
    png = plot(args.out, data["drain"], data["open_loop"])
    print(f"wrote {json_path} and {png}")


if __name__ == "__main__":
    main()
