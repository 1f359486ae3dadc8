"""The chaos scenario: open-loop invoices through the whole system under a seeded fault schedule.

One run: stand up the stack (:mod:`benchmarks.chaos.stack`), submit ``invoices``
over REST at a constant Poisson rate spread over the fault schedule, do each
fault of :func:`~benchmarks.chaos.schedule.fault_schedule` at its time, sample
the timeline, wait for the backlog and the deliveries to drain, then run the
oracle (:mod:`benchmarks.chaos.oracle`) against every 202 the client saw. The
result (JSON, a PNG timeline and a one-screen summary) says what was injected,
how long each fault took to recover from and whether every invariant held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.chaos.faults import FaultRecord, inject
from benchmarks.chaos.oracle import ClientLog, OracleReport, check
from benchmarks.chaos.report import recovery_times, summarise, within, write_timeline
from benchmarks.chaos.schedule import CI_KINDS, FaultKind, fault_schedule, span
from benchmarks.chaos.serve_stack import ServeOptions, running_serve_stack, supervised_delay
from benchmarks.chaos.stack import Stack, StackConfig, running_stack
from benchmarks.load.generator import OpenLoopGenerator, schedule
from benchmarks.report import percentile
from benchmarks.scenario import ArrivalSpec
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
from pipeline.queries import q

#: Intake requests a client keeps on the wire.
CLIENT_CONNECTIONS = 8
#: How long a client keeps retrying one submission (5xx, no answer).
CLIENT_RETRY_S = 60.0


@dataclass(frozen=True)
class ChaosOptions:
    invoices: int = 200
    seed: int = 17
    kinds: tuple[FaultKind, ...] = CI_KINDS
    rounds: int = 1
    gap_s: float = 4.0
    duration_s: float = 4.0
    start_s: float = 6.0
    drain_timeout_s: float = 180.0
    stack: StackConfig = field(default_factory=StackConfig)
    #: ``--stack serve``: the deployed Serve stack (:mod:`benchmarks.chaos.serve_stack`);
    #: None: the harness stack (:mod:`benchmarks.chaos.stack`).
    serve: ServeOptions | None = None
    out_dir: Path | None = None
    progress: bool = True
    #: Called after the oracle, while the system is still up (tests break the final
    #: state on purpose and check the oracle notices); its answer is ``ChaosResult.probe``.
    after_check: Callable[[Stack, ClientLog], Awaitable[Any]] | None = None


@dataclass
class ChaosResult:
    options: ChaosOptions
    faults: list[FaultRecord]
    samples: list[dict[str, float]]
    oracle: OracleReport
    clients: ClientLog
    metrics: dict[str, Any]
    drained: bool
    probe: Any = None

    @property
    def ok(self) -> bool:
        return self.oracle.ok and self.drained

    def as_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "scenario": "chaos",
            "invoices": o.invoices,
            "seed": o.seed,
            "kinds": [str(k) for k in o.kinds],
            "rounds": o.rounds,
            "stack_kind": "serve" if o.serve else "harness",
            "stack": o.stack.__dict__,
            "serve": o.serve.__dict__ if o.serve else None,
            "drained": self.drained,
            "faults": [f.as_dict() for f in self.faults],
            "metrics": self.metrics,
            "oracle": self.oracle.as_dict(),
            "samples": self.samples,
        }


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def _submit(
    stack: Stack, offsets: list[float], clients: ClientLog, t0: float
) -> tuple[OpenLoopGenerator, httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=CLIENT_CONNECTIONS)
    wire = asyncio.Semaphore(CLIENT_CONNECTIONS)
    client = httpx.AsyncClient(base_url=stack.intake_url, limits=limits, timeout=60)
    headers = {"Authorization": f"Bearer {stack.api_key}"}

    async def fire(i: int) -> tuple[str, int | None, Any]:
        inv = stack.corpus[i % len(stack.corpus)]
        body = {"document": {"text": inv.ocr_text}}
        # A client retries with the same key (one job either way) for up to
        # CLIENT_RETRY_S: long enough to outlast a database restart.
        give_up = time.monotonic() + CLIENT_RETRY_S
        r: httpx.Response | None = None
        while time.monotonic() < give_up:
            try:
                async with wire:
                    r = await client.post(
                        "/v1/extraction-jobs",
                        json=body,
                        headers={**headers, "Idempotency-Key": f"chaos-{i}"},
                    )
            except httpx.HTTPError:
                await asyncio.sleep(0.5)
                continue
            if r.status_code in (200, 202):
                clients.accept(r.json()["job_id"], time.monotonic() - t0)
                return "accepted", r.status_code, None
            if r.status_code < 500:
                break
            await asyncio.sleep(0.5)
        status = r.status_code if r is not None else 0
        clients.reject(status)
        return "rejected", status, r.text[:200] if r is not None else "no answer"

    return OpenLoopGenerator(offsets, fire), client


async def _read_sample(stack: Stack) -> Any:
    """One ``chaos_sample`` row, or None while the database does not answer (a
    restart or a terminated backend; the pool replaces the dead connection)."""
    try:
        async with stack.pool.acquire() as conn:
            return await conn.fetchrow(q("chaos_sample"))
    except TRANSIENT_DB_ERRORS as exc:
        log(f"chaos: sample skipped, database unavailable ({type(exc).__name__})")
        return None


async def _sample(stack: Stack, t0: float, clients: ClientLog, out: list[dict[str, float]]) -> None:
    while True:
        row = await _read_sample(stack)
        if row is not None:
            out.append({"t": time.monotonic() - t0, "accepted": len(clients.accepted), **dict(row)})
        await asyncio.sleep(0.5)


async def _drain(stack: Stack, clients: ClientLog, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = await _read_sample(stack)
        if row is not None and (
            row["settled"] >= len(clients.accepted)
            and row["deliveries_open"] == 0
            and row["unpublished"] == 0
        ):
            return True
        await asyncio.sleep(0.5)
    return False


async def _metrics(
    stack: Stack,
    faults: list[FaultRecord],
    samples: list[dict[str, float]],
    clients: ClientLog,
    offered_rate: float,
) -> dict[str, Any]:
    async with stack.pool.acquire() as conn:
        timings = await conn.fetch(q("chaos_job_timing_list"))
        jobs = await conn.fetch(q("oracle_job_list"), None)
    latencies = [r["seconds"] for r in timings]
    attempts = [r["attempts"] for r in jobs]
    per_kind: dict[str, int] = {}
    for f in faults:
        per_kind[f.kind] = per_kind.get(f.kind, 0) + int(f.triggered)
    recovery = recovery_times(faults, samples, offered_rate)
    lease = stack.config.lease_s
    peak = max(samples, key=lambda s: s["unpublished"], default={"t": 0.0, "unpublished": 0})
    return {
        "accepted": len(clients.accepted),
        "rejected": dict(clients.rejected),
        "faults_per_kind": per_kind,
        "faults_not_triggered": [f.kind for f in faults if not f.triggered],
        "recovery_s": recovery,
        "offered_rate_per_s": round(offered_rate, 3),
        "recovered_within_two_leases": within(recovery, "recovery_s", 2 * lease),
        "caught_up_within_two_leases": within(recovery, "catch_up_s", 2 * lease),
        "lease_s": lease,
        "completion_latency_s": {
            "n": len(latencies),
            "p50": percentile(latencies, 50),
            "p99": percentile(latencies, 99),
            "max": max(latencies, default=float("nan")),
        },
        "retries_per_job": {
            "mean": (sum(attempts) / len(attempts) - 1) if attempts else float("nan"),
            "max": (max(attempts) - 1) if attempts else 0,
            "jobs_retried": sum(1 for a in attempts if a > 1),
        },
        "uncertain_attempts": sum(r["uncertain_attempts"] for r in jobs),
        # Jobs flow without the relay (drivers scan), so a stalled relay shows only here.
        "outbox_unpublished_peak": {"events": peak["unpublished"], "at_s": round(peak["t"], 1)},
        "late_results_discarded": sum(r["late_results"] for r in jobs),
        # Serve stack: each kill's Ray restart and the supervisor's start() after it.
        "supervised": stack.supervised(),
        "database_url": stack.dsn,
        "private_postgres_starts": stack.postgres.starts if stack.postgres is not None else None,
    }


async def run_chaos(opts: ChaosOptions) -> ChaosResult:
    """One chaos run end to end; see the module docstring."""
    cfg = opts.stack
    faults = fault_schedule(
        opts.seed, opts.kinds, rounds=opts.rounds, start_s=opts.start_s, gap_s=opts.gap_s,
        duration_s=opts.duration_s, drivers=cfg.drivers,
    )  # fmt: skip
    arrivals_s = max(span(faults) + opts.gap_s, 10.0)
    if opts.serve:  # kills wait for the supervisor's start(): keep work flowing past them
        arrivals_s += supervised_delay(faults)
    rate = opts.invoices / arrivals_s
    offsets = schedule(ArrivalSpec(process="poisson", rate=rate, duration_s=arrivals_s), opts.seed)
    offsets = (offsets + [arrivals_s] * opts.invoices)[: opts.invoices]
    log(f"chaos: {opts.invoices} invoices over {arrivals_s:.0f}s, {len(faults)} faults")
    opened = running_serve_stack(cfg, opts.serve) if opts.serve else running_stack(cfg)
    async with opened as stack:
        clients = ClientLog()
        samples: list[dict[str, float]] = []
        records: list[FaultRecord] = []
        t0 = time.monotonic()
        gen, client = await _submit(stack, offsets, clients, t0)
        sampler = asyncio.create_task(_sample(stack, t0, clients, samples))

        async def faulting() -> None:
            for fault in faults:
                delay = t0 + fault.at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                record = await inject(stack, fault, t0)
                records.append(record)
                if opts.progress:
                    log(f"[{record.start_s:6.1f}s] {record.kind}: {record.detail}")

        try:
            await asyncio.gather(gen.run(wait=True, timeout=opts.drain_timeout_s), faulting())
            drained = await _drain(stack, clients, opts.drain_timeout_s)
            await asyncio.sleep(1.0)  # one more sample after the drain
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await gen.cancel()
            await client.aclose()
        async with stack.pool.acquire() as conn:
            oracle = await check(conn, clients, admission=stack.admission_budget())
        metrics = await _metrics(stack, records, samples, clients, rate)
        probe = await opts.after_check(stack, clients) if opts.after_check else None
    result = ChaosResult(opts, records, samples, oracle, clients, metrics, drained, probe)
    if opts.out_dir is not None:
        opts.out_dir.mkdir(parents=True, exist_ok=True)
        (opts.out_dir / "chaos.json").write_text(
            json.dumps(result.as_dict(), indent=2, default=str)
        )
        write_timeline(opts.out_dir / "chaos_timeline.png", result.as_dict())
        (opts.out_dir / "chaos_summary.txt").write_text(summarise(result.as_dict(), oracle) + "\n")
    return result
