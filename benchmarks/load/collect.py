"""What a run measured: samples while it runs, and the result built from the database.

The result is checked for internal consistency before anything is written:
every admitted job is exactly one of completed, review, failed or pending
(:func:`check_consistency`). Money is :class:`~decimal.Decimal` throughout
(:func:`cost_report`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg

from benchmarks.capacity import CapacityInputs, predict
from benchmarks.engines.bench_engine import CallTiming, timing_summary
from benchmarks.fake_provider import CallRecord
from benchmarks.invoices.generator import GeneratedInvoice
from benchmarks.load.generator import OpenLoopGenerator, lag_stats
from benchmarks.report import percentile
from benchmarks.scenario import PricingSpec, Scenario
from pipeline.extraction import prompt_budget
from pipeline.jobs import JobStore
from pipeline.queries import q

SETTLED_STATES = ("SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL", "CANCELLED")
MILLION = Decimal(1_000_000)


class InconsistentRun(RuntimeError):
    """A run's counts do not add up (completed + review + failed + pending != admitted)."""


@dataclass
class Sample:
    t: float
    runnable: int
    running: int
    oldest_runnable_age_s: float
    settled: int


@dataclass
class RunState:
    """What the run observed while it ran (the DB holds the rest)."""

    t0_wall: float = 0.0
    accepted: dict[str, tuple[str, float]] = field(default_factory=dict)
    acceptance_latency: list[float] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)


def jain_index(values: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one tenant gets everything."""
    if not values or all(v == 0 for v in values):
        return math.nan
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def quantiles(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "mean": sum(values) / len(values) if values else math.nan,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (concurrent provider calls)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = cur = 0
    for _, step in events:
        cur += step
        best = max(best, cur)
    return best


def count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def merge_counts(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def buckets(by_state: dict[str, int]) -> dict[str, int]:
    """Job states folded into completed / review_required / failed / pending."""
    return {
        "completed": by_state.get("SUCCEEDED", 0),
        "review_required": by_state.get("REVIEW_REQUIRED", 0),
        "failed": by_state.get("FAILED_TERMINAL", 0),
        "pending": sum(n for s, n in by_state.items() if s not in SETTLED_STATES),
    }


def check_consistency(admitted: int, jobs_in_db: int, b: dict[str, int]) -> None:
    """The database holds exactly the admitted jobs, each in exactly one bucket."""
    total = b["completed"] + b["review_required"] + b["failed"] + b["pending"]
    if jobs_in_db != admitted or total != admitted or any(v < 0 for v in b.values()):
        raise InconsistentRun(
            f"{admitted} admitted, {jobs_in_db} jobs in the database: completed "
            f"{b['completed']} + review {b['review_required']} + failed {b['failed']} "
            f"+ pending {b['pending']} = {total}"
        )


def cost_report(
    pricing: PricingSpec, prompt_tokens: int, completion_tokens: int, completed: int
) -> dict[str, Any]:
    """Cost of the reported usage (every attempt) and per completed job, in Decimal.

    Per-job cost is ``None`` when nothing completed (not zero: a run that only
    failed has no cost per success). Amounts are strings in the JSON.
    """
    total = (
        Decimal(prompt_tokens) * pricing.prompt_per_million
        + Decimal(completion_tokens) * pricing.completion_per_million
    ) / MILLION
    per_job = (total / completed).quantize(Decimal("0.00000001")) if completed else None
    return {
        "currency": pricing.currency,
        "prompt_per_million": str(pricing.prompt_per_million),
        "completion_per_million": str(pricing.completion_per_million),
        "total": str(total.quantize(Decimal("0.00000001"))),
        "per_completed_job": None if per_job is None else str(per_job),
    }


async def sampler(store: JobStore, state: RunState, every: float, stop: asyncio.Event) -> None:
    """Backlog, running jobs, oldest runnable age and settled count every ``every`` s."""
    while not stop.is_set():
        b = await store.backlog()
        async with store.pool.acquire() as conn:
            settled = await conn.fetchval(q("bench_settled_count"))
        age = b["oldest_runnable_age_seconds"]
        state.samples.append(
            Sample(
                t=time.time() - state.t0_wall,
                runnable=int(b["runnable"]),
                running=int(b["running"]),
                oldest_runnable_age_s=float(age) if age is not None else 0.0,
                settled=int(settled),
            )
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


@dataclass
class RunRecord:
    """Everything the runner hands to :func:`collect` besides the database."""

    scenario: Scenario
    corpus: list[GeneratedInvoice]
    state: RunState
    gen: OpenLoopGenerator
    arrivals_done: float
    engine_calls: list[CallTiming]
    engine_streams: bool
    driver_outcomes: dict[str, int]
    fake_calls: list[CallRecord] | None = None
    delivery_enabled: bool = False
    #: Arrival index -> job id of the accepted arrivals.
    job_of: dict[int, str] = field(default_factory=dict)
    #: A planted credit note's origin arrival -> its job id (benchmarks.load.plants).
    credit_jobs: dict[int, str] = field(default_factory=dict)


async def collect(pool: asyncpg.Pool, rec: RunRecord) -> dict[str, Any]:
    """The run's result from the database and what the runner observed."""
    scenario, state = rec.scenario, rec.state
    async with pool.acquire() as conn:
        jobs = await conn.fetch(q("bench_job_rows"))
        reasons = {r["code"]: r["n"] for r in await conn.fetch(q("bench_review_reasons"))}
        deliveries = await conn.fetch(q("bench_delivery_rows"))
        erp = await conn.fetchrow(q("bench_erp_postings"))
    t0 = state.t0_wall
    admitted = len(state.accepted)
    by_state: dict[str, int] = {}
    per_tenant: dict[str, dict[str, Any]] = {
        t.name: {"weight": t.weight, "admitted": 0, "completed": 0, "completion": []}
        for t in scenario.tenants
    }
    completion_all: list[float] = []
    goodput = 0
    attempts: list[int] = []
    prompt_tokens = completion_tokens = 0
    last_finish = 0.0
    for j in jobs:
        by_state[j["state"]] = by_state.get(j["state"], 0) + 1
        tenant, accepted_at = state.accepted.get(str(j["id"]), ("?", math.nan))
        entry = per_tenant.setdefault(
            tenant, {"weight": 1.0, "admitted": 0, "completed": 0, "completion": []}
        )
        entry["admitted"] += 1
        attempts.append(int(j["attempt"]))
        prompt_tokens += int(j["prompt_tokens"])
        completion_tokens += int(j["completion_tokens"])
        if j["finished_at"] is not None:
            finished = j["finished_at"].timestamp()
            last_finish = max(last_finish, finished - t0)
            completion_all.append(finished - accepted_at)
            entry["completion"].append(finished - accepted_at)
            if j["state"] == "SUCCEEDED":
                entry["completed"] += 1
                if j["finished_at"] <= j["deadline_at"]:
                    goodput += 1
    b = buckets(by_state)
    check_consistency(admitted, len(jobs), b)
    delivered = [
        d["delivered_at"].timestamp() - state.accepted[str(d["job_id"])][1]
        for d in deliveries
        if d["state"] == "delivered" and str(d["job_id"]) in state.accepted
    ]
    elapsed = max(last_finish, rec.arrivals_done)
    calls = rec.engine_calls
    out_tokens = sum(c.completion_tokens for c in calls if c.ok)
    result: dict[str, Any] = {
        "scenario": scenario.model_dump(mode="json"),
        "requests": {
            "scheduled": len(rec.gen.sends),
            "sent": rec.gen.sent,
            "admitted": admitted,
            "rejected": state.rejected,
            "loadgen_lag_s": lag_stats(rec.gen.sends),
        },
        "outcomes": {"admitted": admitted, **b, "goodput_jobs": goodput},
        "states": by_state,
        "review_reasons": reasons,
        "duration_s": {
            "arrivals": rec.arrivals_done,
            "last_settled": last_finish,
            "elapsed": elapsed,
        },
        "request_throughput": admitted / rec.arrivals_done if rec.arrivals_done > 0 else math.nan,
        "goodput_per_s": goodput / elapsed if elapsed > 0 else math.nan,
        # Every settled job, whatever its outcome: what a run with review outcomes
        # planted compares with one without.
        "settled_per_s": len(completion_all) / elapsed if elapsed > 0 else math.nan,
        "output_throughput": out_tokens / elapsed if elapsed > 0 else math.nan,
        "acceptance_latency_s": quantiles(state.acceptance_latency),
        "completion_latency_s": quantiles(completion_all),
        "delivery": {
            "enabled": rec.delivery_enabled,
            "states": count(d["state"] for d in deliveries),
            "erp_postings": int(erp["postings"]),
            "erp_duplicates_absorbed": int(erp["duplicates_absorbed"]),
            "accept_to_delivery_s": quantiles(delivered),
        },
        "tenants": {
            name: {
                "weight": e["weight"],
                "admitted": e["admitted"],
                "completed": e["completed"],
                "completion_latency_s": quantiles(e["completion"]),
            }
            for name, e in per_tenant.items()
        },
        "jain_fairness": jain_index(
            [e["completed"] / e["weight"] for e in per_tenant.values() if e["admitted"]]
        ),
        "engine": timing_summary(calls, streams=rec.engine_streams),
        "attempts_per_job": sum(attempts) / len(attempts) if attempts else math.nan,
        "provider_calls": len(calls),
        "provider_calls_per_job": len(calls) / admitted if admitted else math.nan,
        "provider_call_outcomes": count("ok" if c.ok else c.error for c in calls),
        "tokens": {
            "prompt": prompt_tokens,
            "completion": completion_tokens,
            "total_per_s": (prompt_tokens + completion_tokens) / elapsed if elapsed else 0,
        },
        "cost": cost_report(scenario.pricing, prompt_tokens, completion_tokens, b["completed"]),
        "driver_outcomes": rec.driver_outcomes,
        "samples": [s.__dict__ for s in state.samples],
        "finish_times_s": sorted(
            j["finished_at"].timestamp() - t0 for j in jobs if j["finished_at"] is not None
        ),
        "acceptance_latencies_s": state.acceptance_latency,
        "completion_latencies_s": completion_all,
        "delivery_latencies_s": delivered,
    }
    if rec.fake_calls is not None:
        fc = rec.fake_calls
        result["provider_outcomes"] = count(c.outcome for c in fc)
        result["provider_max_concurrency"] = max_overlap([(c.at, c.at + c.latency_s) for c in fc])
        result["provider_latency_s"] = quantiles([c.latency_s for c in fc if c.outcome == "ok"])
    if scenario.capacity_check:
        result["capacity"] = capacity_check(
            scenario, rec.corpus, admitted, last_finish, rec.fake_calls or []
        )
    return result


def capacity_check(
    scenario: Scenario,
    corpus: list[GeneratedInvoice],
    admitted: int,
    measured_drain_s: float,
    calls: list[CallRecord],
) -> dict[str, Any]:
    """The model's drain time for the admitted backlog vs the measured one.

    Service time is the configured mean latency of the fake provider (what an
    operator would plug in); the measured mean is reported next to it.
    """
    budgets = [prompt_budget(inv.ocr_text, include_schema=False) for inv in corpus]
    reserved = sum(b.prompt_tokens + b.max_output_tokens for b in budgets) / len(budgets)
    lat = scenario.engine.latency
    mean_service = {
        "fixed": lat.a,
        "uniform": (lat.a + lat.b) / 2,
        "lognormal": lat.a * math.exp(lat.b**2 / 2),
        "none": 0.001,
    }[lat.dist]
    adm = scenario.admission
    inputs = CapacityInputs(
        rpm=float(adm.rpm) if adm.rpm else math.inf,
        tpm=float(adm.tpm) if adm.tpm else math.inf,
        reserved_tokens=reserved,
        concurrency=float(adm.concurrency) if adm.concurrency else math.inf,
        mean_service_seconds=mean_service,
        attempts_per_job=1.0,
        backlog=admitted,
    )
    report = predict(inputs)
    ok = [c.latency_s for c in calls if c.outcome == "ok"]
    return {
        "inputs": inputs.__dict__,
        "prediction": report.as_dict(),
        "predicted_drain_s": report.drain_seconds,
        "measured_drain_s": measured_drain_s,
        "error": (measured_drain_s - report.drain_seconds) / report.drain_seconds,
        "measured_mean_service_s": sum(ok) / len(ok) if ok else math.nan,
    }
