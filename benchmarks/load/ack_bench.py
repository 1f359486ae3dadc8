"""Acknowledgement run (issue 47, item 3): the reference ERP acknowledges a share of
the deliveries at once, a share late and the rest never; every delivery must settle
or alert once, and nothing may post or record twice.

``python -m benchmarks.load.ack_bench --deliveries 200 [--at-once 0.9 --late 0.05]``

Everything runs on loopback, each in its own process where a deployment has one:
the intake API (:func:`benchmarks.infra.intake_server`, which receives the
acknowledgements), the reference ERP receiver (:class:`benchmarks.erp_acknowledger.AckPlan`
via ``--ack-callback``), and here the delivery dispatcher and the maintenance
actor's overdue pass. The jobs are settled directly through the job store (no
inference): what is measured is the delivery and acknowledgement path. The
endpoint's window is real time (at least 60 s), so a run takes about a minute
and a half. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from benchmarks.erp_acknowledger import AckPlan
from benchmarks.infra import free_port, fresh_database, intake_server, terminate
from pipeline.database import create_pool
from pipeline.delivery import (
    EndpointRegistry,
    OverdueAcknowledgements,
    SecretBox,
    guard_from_settings,
    job_store,
)
from pipeline.jobs import AcceptRequest, DocumentIn
from pipeline.settings import Settings
from pipeline.tenants import create_tenant

#: The sealing key of this run's endpoint secrets (the intake process opens them).
_KEK = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


async def _settle_jobs(
    pool: asyncpg.Pool, settings: Settings, tenant_id: uuid.UUID, n: int
) -> None:
    """``n`` SUCCEEDED jobs with distinct invoices (each gets its delivery)."""
    store = job_store(pool, settings)
    for i in range(n):
        key = uuid.uuid4().hex
        await store.accept(
            AcceptRequest(tenant_id=tenant_id, idempotency_key=key, document=DocumentIn(key))
        )
        for lease in await store.claim(f"ack-run-{i}", limit=10):
            await store.succeed(
                lease,
                result={
                    "invoice_number": f"ACK-{i:06d}-{key[:6]}",
                    "currency": "EUR",
                    "total": f"{100 + i}.00",
                },
            )


async def _counts(pool: asyncpg.Pool, ledger: str) -> dict[str, Any]:
    async with pool.acquire() as conn:
        states = {
            f"{r['state']}/{r['ack_state']}": r["n"]
            for r in await conn.fetch(
                "SELECT state, ack_state, count(*) AS n FROM deliveries GROUP BY 1, 2"
            )
        }
        messages = {
            r["effect"]: r["n"]
            for r in await conn.fetch(
                "SELECT effect, count(*) AS n FROM delivery_acknowledgements GROUP BY 1"
            )
        }
        twice = await conn.fetchval(
            "SELECT count(*) FROM (SELECT delivery_id FROM delivery_acknowledgements"
            " WHERE effect = 'recorded' GROUP BY 1 HAVING count(*) > 1) x"
        )
        alerts = await conn.fetchval(
            "SELECT count(*) FROM endpoint_events WHERE kind = 'ack_overdue'"
        )
        alerted_twice = await conn.fetchval(
            "SELECT count(*) FROM (SELECT detail FROM endpoint_events WHERE kind = 'ack_overdue'"
            " GROUP BY 1 HAVING count(*) > 1) x"
        )
        posted = await conn.fetch(
            "SELECT applications, effect_count FROM erp_postings WHERE ledger = $1", ledger
        )
        lag = [
            r["s"]
            for r in await conn.fetch(
                "SELECT extract(epoch FROM acknowledged_at - delivered_at) AS s FROM deliveries"
                " WHERE acknowledged_at IS NOT NULL AND ack_overdue_at IS NULL"
            )
        ]
    return {
        "deliveries_by_state": states,
        "ack_messages_by_effect": messages,
        "deliveries_recorded_twice": int(twice),
        "overdue_alerts": int(alerts),
        "deliveries_alerted_twice": int(alerted_twice),
        "erp_jobs_posted": len(posted),
        "erp_postings_over_one": sum(1 for r in posted if r["effect_count"] > 1),
        "erp_applications_over_one": sum(1 for r in posted if r["applications"] > 1),
        "ack_after_delivery_seconds": _quantiles([float(x) for x in lag]),
    }


async def _by_choice(pool: asyncpg.Pool, plan: AckPlan) -> dict[str, dict[str, int]]:
    """Acknowledgement states of the deliveries the ERP acknowledged at once, late
    and never (its choice is a function of the delivery id and the plan's seed)."""
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, ack_state FROM deliveries")
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        states = out.setdefault(plan.choose(str(r["id"])), {})
        states[r["ack_state"]] = states.get(r["ack_state"], 0) + 1
    return out


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    xs = sorted(xs)
    return {
        "p50": round(statistics.median(xs), 3),
        "p95": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 3),
        "max": round(xs[-1], 3),
    }


async def run(
    n: int, at_once: float, late: float, late_seconds: float, window: int
) -> dict[str, Any]:
    async with fresh_database() as dsn:
        overrides: dict[str, Any] = {
            "database_url": dsn,
            "webhook_secret_key": _KEK,
            "delivery_allow_loopback_http": True,
        }
        settings = Settings(**overrides)
        pool = await create_pool(dsn, min_size=2, max_size=8)
        erp: asyncio.subprocess.Process | None = None
        dispatcher: Any = None
        try:
            async with pool.acquire() as conn:
                tenant = await create_tenant(conn, f"ack-run-{uuid.uuid4().hex[:6]}")
            async with intake_server(overrides) as api:
                port = free_port()
                registry = EndpointRegistry(
                    pool, guard_from_settings(settings), SecretBox.from_settings(settings)
                )
                url = f"http://127.0.0.1:{port}/webhooks/fenceline"
                issued = await registry.register(tenant.id, url, ack_window_seconds=window)
                ledger = f"ack-{uuid.uuid4().hex[:6]}"
                erp = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "benchmarks.erp_receiver", "--port", str(port),
                    "--database-url", dsn, "--ledger", ledger, "--ack-callback", api,
                    "--ack-at-once", str(at_once), "--ack-late", str(late),
                    "--ack-late-seconds", str(late_seconds),
                    env={**os.environ, "FENCELINE_ERP_SECRETS": issued.secret},
                    stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert erp.stdout is not None
                line = await asyncio.wait_for(erp.stdout.readline(), 30)
                if not line.startswith(b"listening"):
                    raise RuntimeError(f"the ERP receiver did not start: {line!r}")
                from cluster.delivery import build_dispatcher

                dispatcher = build_dispatcher(pool, settings, worker_id="ack-run")
                await dispatcher.start()
                t0 = time.monotonic()
                await _settle_jobs(pool, settings, tenant.id, n)
                settled_s = time.monotonic() - t0
                # Wait for every delivery, then past the window (and the late ones).
                while True:
                    async with pool.acquire() as conn:
                        left = await conn.fetchval(
                            "SELECT count(*) FROM deliveries WHERE state <> 'delivered'"
                        )
                    if left == 0:
                        break
                    await asyncio.sleep(0.5)
                delivered_s = time.monotonic() - t0
                # Past the last delivery's window (ack_due_at = its 2xx + window).
                await asyncio.sleep(max(window, late_seconds) + 2)
                overdue = OverdueAcknowledgements(pool)
                first = await overdue.run_once()
                second = await overdue.run_once()
                result = await _counts(pool, ledger)
                result["by_choice"] = await _by_choice(pool, AckPlan(api, "", at_once, late))
                result.update(
                    deliveries=n,
                    plan={"at_once": at_once, "late": late, "late_seconds": late_seconds},
                    window_seconds=window,
                    settle_seconds=round(settled_s, 2),
                    all_delivered_seconds=round(delivered_s, 2),
                    overdue_first_pass=first.overdue,
                    overdue_second_pass=second.overdue,
                )
                return result
        finally:
            if dispatcher is not None:
                await dispatcher.close()
            await terminate(erp, 10)
            await pool.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load.ack_bench", description=__doc__
    )
    parser.add_argument("--deliveries", type=int, default=200)
    parser.add_argument("--at-once", type=float, default=0.90)
    parser.add_argument("--late", type=float, default=0.05)
    parser.add_argument("--late-seconds", type=float, default=10.0)
    parser.add_argument("--window", type=int, default=60, help="seconds (at least 60)")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    result = asyncio.run(
        run(args.deliveries, args.at_once, args.late, args.late_seconds, args.window)
    )
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
