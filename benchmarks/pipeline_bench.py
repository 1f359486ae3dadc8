"""Whole-pipeline benchmark: open-loop REST intake → durable jobs → real drivers → fake provider.

One run of a scenario (``benchmarks/scenarios/*.yaml``) stands up, in this
process and on loopback:

* a fresh PostgreSQL database (created, migrated, and dropped after the run);
* the intake API (:func:`pipeline.api.create_app`) under a real uvicorn;
* ``drivers.count`` :class:`pipeline.worker.DriverLoop` s woken by one
  :class:`pipeline.scheduler.Scheduler`, all asking one in-process
  :class:`cluster.admission.AdmissionActor` (through the same
  :class:`cluster.drivers.ActorGate` Ray drivers use) for RPM/TPM/concurrency;
* the fake OpenAI-compatible provider (:mod:`benchmarks.fake_provider`) with
  the scenario's latency distribution and provider-side RPM/TPM limits.

Load comes from :class:`benchmarks.loadgen.OpenLoopGenerator`, so a saturated
pipeline shows up as backlog growth, not as a slower client. The result is
checked for internal consistency before anything is written: every admitted
job is exactly one of completed, review, failed or pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

import asyncpg
import httpx
import matplotlib
import uvicorn
import yaml
from pydantic import BaseModel, ConfigDict, Field

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.capacity import CapacityInputs, predict
from benchmarks.fake_provider import CallRecord, FakeProvider, FaultPlan, Latency
from benchmarks.loadgen import ArrivalSpec, OpenLoopGenerator, lag_stats, schedule
from benchmarks.report import bar_plot, percentile, write_json
from cluster.admission import AdmissionActor, AdmissionClient, LocalActorHandle
from cluster.drivers import ActorGate
from pipeline.admission_limits import AdmissionConfig
from pipeline.api import create_app
from pipeline.database import connect, create_pool, migrate
from pipeline.engines import OpenAICompatibleEngine
from pipeline.invoices import GeneratedInvoice, Variant, generate_corpus
from pipeline.jobs import JobStore
from pipeline.master_data import upsert_supplier
from pipeline.prompts import prompt_budget
from pipeline.scheduler import Scheduler, SchedulerConfig, WorkSignal
from pipeline.settings import Settings
from pipeline.tenants import create_api_key, create_tenant
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig

SCENARIO_DIR = Path(__file__).parent / "scenarios"
ADMIN_DSN = os.environ.get(
    "FENCELINE_BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
)
#: Engine kinds a scenario may name; only ``fake`` is implemented by this runner.
ENGINE_KINDS = ("fake", "vllm-cpu", "vllm-gpu")
#: Concurrent intake requests on the wire (a client's connection limit).
CLIENT_CONNECTIONS = 16


class TenantSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    #: Share of arrivals, and the fairness weight of the tenant.
    weight: float = Field(1.0, gt=0)


class DocumentSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    #: Distinct invoices generated (requests cycle through them).
    corpus: int = Field(100, ge=1)
    max_line_items: int = Field(8, ge=1, le=200)
    #: Variants cycled through the corpus; non-clean ones end in REVIEW_REQUIRED.
    variants: tuple[Variant, ...] = (Variant.CLEAN,)


class EngineSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["fake", "vllm-cpu", "vllm-gpu"] = "fake"
    latency: Latency = Field(default_factory=lambda: Latency(dist="fixed", a=0.2))
    #: Provider-side limits (the fake answers 429 above them).
    rpm: int | None = None
    tpm: int | None = None


class AdmissionSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None


class DriverSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int = Field(2, ge=1)
    concurrency: int = Field(8, ge=1)


class Scenario(BaseModel):
    """A benchmark scenario (one YAML file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    description: str = ""
    seed: int = 0
    arrival: ArrivalSpec
    tenants: tuple[TenantSpec, ...] = (TenantSpec(name="acme"),)
    documents: DocumentSpec = Field(default_factory=DocumentSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)
    admission: AdmissionSpec = Field(default_factory=AdmissionSpec)
    drivers: DriverSpec = Field(default_factory=DriverSpec)
    #: Job deadline given at submission (goodput counts completions before it).
    deadline_s: float = Field(600.0, gt=0)
    #: After the last arrival, how long to wait for the backlog to settle.
    drain_timeout_s: float = Field(300.0, gt=0)
    #: Compare the capacity model's predicted drain time with the measured one.
    capacity_check: bool = False
    sample_every_s: float = Field(0.5, gt=0)


def load_scenario(name_or_path: str) -> Scenario:
    """A scenario by name (``smoke``) or by path to its YAML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Scenario.model_validate(data)


class InconsistentRun(RuntimeError):
    """A run's counts do not add up (completed + review + failed + pending != admitted)."""


class UnsupportedEngine(ValueError):
    """A scenario names an engine kind this runner cannot drive."""


def check_engine(scenario: Scenario) -> None:
    if scenario.engine.kind != "fake":
        raise UnsupportedEngine(
            f"engine kind {scenario.engine.kind!r} is documented but not implemented by the "
            "pipeline benchmark yet; only 'fake' runs here. For vLLM figures use "
            "benchmarks/engine_compare.py (Serve vs direct vLLM)."
        )


# ---- infrastructure ---------------------------------------------------------------


def _dsn_for(database: str) -> str:
    base, _, _ = ADMIN_DSN.rpartition("/")
    return f"{base}/{database}"


@contextlib.asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new migrated database for one run; dropped (forcibly) afterwards."""
    name = f"fl_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        conn = await connect(_dsn_for(name))
        try:
            await migrate(conn)
        finally:
            await conn.close()
        yield _dsn_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@contextlib.asynccontextmanager
async def intake_server(overrides: dict[str, Any], timeout: float = 60.0) -> AsyncIterator[str]:
    """The intake API (:func:`pipeline.api.create_app`) under uvicorn in its own process.

    Intake runs apart from the drivers, as in a deployment; in one process a
    burst's HTTP handling would steal the drivers' event loop and the measured
    drain would include that contention. ``overrides`` are Settings fields.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.pipeline_bench",
        "intake",
        str(port),
        json.dumps(overrides),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{url}/healthz")).status_code == 200:
                        break
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError("the intake process did not start")
                await asyncio.sleep(0.2)
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def serve_intake(port: int, overrides_json: str) -> None:
    """Entry of the intake process (see :func:`intake_server`)."""
    settings = Settings(**json.loads(overrides_json))
    uvicorn.run(
        create_app(settings),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        backlog=4096,
    )


def scenario_corpus(scenario: Scenario) -> list[GeneratedInvoice]:
    """The scenario's invoices (deterministic; the fake process regenerates the same)."""
    return generate_corpus(
        scenario.documents.corpus,
        seed=scenario.seed * 1000,
        variants=scenario.documents.variants,
        max_line_items=scenario.documents.max_line_items,
        anchor=date.today(),
    )


class FakeProcess:
    """The fake provider in its own process, answering with the scenario corpus.

    In-process (a uvicorn thread) it shares the GIL with intake and drivers,
    and on a loaded machine its responses queue behind them, which would add
    Python scheduling delay to every provider call; a separate process keeps
    the provider's latency what the scenario configures.
    """

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, timeout: float = 60.0) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.pipeline_bench",
            "fake-provider",
            str(self.port),
            self.scenario.model_dump_json(),
        )
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    r = await client.get(f"http://127.0.0.1:{self.port}/healthz")
                    if r.status_code == 200:
                        return
                if self._proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError("the fake provider process did not start")
                await asyncio.sleep(0.2)

    async def calls(self) -> list[CallRecord]:
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.get(f"http://127.0.0.1:{self.port}/admin/calls")
            r.raise_for_status()
        return [CallRecord.model_validate(c) for c in r.json()]

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 10)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        self._proc = None


def serve_fake_provider(port: int, scenario_json: str) -> None:
    """Entry of the fake-provider process (see :class:`FakeProcess`)."""
    scenario = Scenario.model_validate_json(scenario_json)
    fake = FakeProvider(port=port, answer=corpus_answer(scenario_corpus(scenario)))
    fake.set_faults(
        FaultPlan(
            latency=scenario.engine.latency,
            rpm=scenario.engine.rpm,
            tpm=scenario.engine.tpm,
            seed=scenario.seed,
        )
    )
    uvicorn.run(fake.app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def corpus_answer(corpus: list[GeneratedInvoice]) -> Any:
    """Fake-provider answer: the candidate extraction of the invoice in the prompt."""
    markers = [(inv.ocr_text[:160], inv.candidate.model_dump_json()) for inv in corpus]

    def answer(body: dict[str, Any]) -> Any:
        user = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        for marker, candidate in markers:
            if marker in user:
                return candidate
        return "{}"

    return answer


# ---- measurement --------------------------------------------------------------------


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


def _quantiles(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "mean": sum(values) / len(values) if values else math.nan,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


async def _sampler(store: JobStore, state: RunState, every: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        b = await store.backlog()
        async with store.pool.acquire() as conn:
            settled = await conn.fetchval(
                "SELECT count(*) FROM extraction_jobs WHERE finished_at IS NOT NULL"
            )
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


def _progress(state: RunState, gen: OpenLoopGenerator, total: int) -> None:
    s = state.samples[-1] if state.samples else None
    line = (
        f"\r[{time.time() - state.t0_wall:6.1f}s] sent {gen.sent}/{total} "
        f"accepted {len(state.accepted)} settled {s.settled if s else 0} "
        f"runnable {s.runnable if s else 0} running {s.running if s else 0} "
        f"oldest {s.oldest_runnable_age_s if s else 0:.1f}s   "
    )
    print(line, end="", file=sys.stderr, flush=True)


# ---- the run ------------------------------------------------------------------------


async def run_scenario(
    scenario: Scenario, out_dir: Path | None = None, *, progress: bool = True
) -> dict[str, Any]:
    """Run one scenario end to end; return (and with ``out_dir``, write) its result."""
    check_engine(scenario)
    offsets = schedule(scenario.arrival, scenario.seed)
    corpus = scenario_corpus(scenario)
    rng = random.Random(f"tenants:{scenario.seed}")
    weights = [t.weight for t in scenario.tenants]
    tenant_of = [rng.choices(range(len(weights)), weights)[0] for _ in offsets]
    state = RunState()
    async with fresh_database() as dsn:
        overrides: dict[str, Any] = {
            "database_url": dsn,
            "scan_interval_seconds": 0.5,
            "default_deadline_seconds": scenario.deadline_s,
            # Intake queues for a pooled connection instead of answering 503 after
            # 5 s: on a loaded machine a burst should measure latency, not timeouts.
            "db_pool_max": 16,
            "db_acquire_timeout_seconds": 60,
        }
        Settings(**overrides)  # validate before starting anything
        pool = await create_pool(dsn, min_size=2, max_size=20)
        fake = FakeProcess(scenario)
        await fake.start()
        try:
            keys: list[tuple[str, str]] = []
            async with pool.acquire() as conn:
                for spec in scenario.tenants:
                    tenant = await create_tenant(
                        conn,
                        f"{spec.name}-{uuid.uuid4().hex[:6]}",
                        weight=max(1, round(spec.weight)),
                    )
                    _, key = await create_api_key(conn, tenant.id, scopes=("jobs",))
                    keys.append((spec.name, key))
                    for inv in corpus:
                        await upsert_supplier(conn, tenant.id, inv.supplier)
            result = await _drive(
                scenario, overrides, pool, fake, corpus, offsets, tenant_of, keys, state, progress
            )
        finally:
            await fake.stop()
            await pool.close()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        result["files"] = [str(write_json(out_dir, "result", result))]
        result["files"] += [str(p) for p in write_plots(out_dir, result)]
    return result


async def _drive(
    scenario: Scenario,
    overrides: dict[str, Any],
    pool: asyncpg.Pool,
    fake: FakeProcess,
    corpus: list[GeneratedInvoice],
    offsets: list[float],
    tenant_of: list[int],
    keys: list[tuple[str, str]],
    state: RunState,
    progress: bool,
) -> dict[str, Any]:
    settings = Settings(**overrides)
    store = JobStore(pool, settings)
    adm = scenario.admission
    actor = AdmissionActor(
        AdmissionConfig(
            scope=f"bench-{scenario.name}",
            rpm=adm.rpm,
            tpm=adm.tpm,
            max_in_flight=adm.concurrency,
        )
    )
    gate = ActorGate(AdmissionClient(LocalActorHandle(actor), scope=f"bench-{scenario.name}"))
    engine = OpenAICompatibleEngine(fake.base_url, "fake-model")
    signal = WorkSignal()
    scheduler = Scheduler(pool, settings, signal, config=SchedulerConfig(scan_interval_seconds=0.5))
    loops = [
        DriverLoop(
            AttemptRunner(
                store,
                engine,
                WorkerConfig(
                    worker_id=f"bench-driver-{i}",
                    concurrency=scenario.drivers.concurrency,
                    claim_batch=scenario.drivers.concurrency,
                    heartbeat_seconds=settings.heartbeat_seconds,
                    idle_poll_seconds=0.5,
                ),
                admission=gate,
            ),
            signal=signal,
        )
        for i in range(scenario.drivers.count)
    ]
    stop_sampling = asyncio.Event()
    # The client holds at most CLIENT_CONNECTIONS requests on the wire, like a
    # real client's connection limit; later arrivals queue in a FIFO semaphore
    # (cheap) rather than in httpx's pool, whose waiter scan is O(waiters) per
    # event and would make the load generator the bottleneck of a large burst.
    # Queueing time counts into acceptance latency; send times stay on schedule.
    limits = httpx.Limits(
        max_connections=CLIENT_CONNECTIONS, max_keepalive_connections=CLIENT_CONNECTIONS
    )
    wire = asyncio.Semaphore(CLIENT_CONNECTIONS)
    async with (
        intake_server(overrides) as url,
        httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client,
    ):
        await scheduler.start()
        for loop in loops:
            await loop.start()

        async def fire(i: int) -> tuple[str, int | None, Any]:
            name, key = keys[tenant_of[i]]
            inv = corpus[i % len(corpus)]
            started = time.monotonic()
            async with wire:
                r = await client.post(
                    "/v1/extraction-jobs",
                    json={"document": {"text": inv.ocr_text}},
                    headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"bench-{i}"},
                )
            if r.status_code == 202:
                state.acceptance_latency.append(time.monotonic() - started)
                state.accepted[r.json()["job_id"]] = (name, time.time())
                return "accepted", r.status_code, None
            state.rejected[str(r.status_code)] = state.rejected.get(str(r.status_code), 0) + 1
            return "rejected", r.status_code, r.text[:200]

        gen = OpenLoopGenerator(offsets, fire)
        state.t0_wall = time.time()
        sampler = asyncio.create_task(
            _sampler(store, state, scenario.sample_every_s, stop_sampling)
        )
        reporter: asyncio.Task[None] | None = None
        if progress:

            async def report() -> None:
                while True:
                    _progress(state, gen, len(offsets))
                    await asyncio.sleep(1.0)

            reporter = asyncio.create_task(report())
        try:
            await gen.run(wait=True, timeout=scenario.drain_timeout_s)
            arrivals_done = time.time() - state.t0_wall
            deadline = time.monotonic() + scenario.drain_timeout_s
            while time.monotonic() < deadline:
                async with pool.acquire() as conn:
                    settled = await conn.fetchval(
                        "SELECT count(*) FROM extraction_jobs WHERE finished_at IS NOT NULL"
                    )
                if settled >= len(state.accepted):
                    break
                await asyncio.sleep(0.25)
            await gen.cancel()
        finally:
            stop_sampling.set()
            await sampler
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
                print(file=sys.stderr)
            for loop in loops:
                await loop.stop(grace_seconds=5)
            await scheduler.stop()
            await actor.stop()
            await engine.aclose()
    calls = await fake.calls()
    return await _collect(scenario, pool, calls, corpus, state, gen, arrivals_done, loops)


async def _collect(
    scenario: Scenario,
    pool: asyncpg.Pool,
    calls: list[CallRecord],
    corpus: list[GeneratedInvoice],
    state: RunState,
    gen: OpenLoopGenerator,
    arrivals_done: float,
    loops: list[DriverLoop],
) -> dict[str, Any]:
    async with pool.acquire() as conn:
        jobs = await conn.fetch(
            "SELECT j.id, j.state, j.attempt, j.finished_at, j.deadline_at, j.created_at,"
            " coalesce(sum(a.prompt_tokens), 0) AS prompt_tokens,"
            " coalesce(sum(a.completion_tokens), 0) AS completion_tokens"
            " FROM extraction_jobs j LEFT JOIN job_attempts a ON a.job_id = j.id"
            " GROUP BY j.id"
        )
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
    tokens = {"prompt": 0, "completion": 0}
    last_finish = 0.0
    for j in jobs:
        by_state[j["state"]] = by_state.get(j["state"], 0) + 1
        tenant, accepted_at = state.accepted.get(str(j["id"]), ("?", math.nan))
        entry = per_tenant.setdefault(
            tenant, {"weight": 1.0, "admitted": 0, "completed": 0, "completion": []}
        )
        entry["admitted"] += 1
        attempts.append(int(j["attempt"]))
        tokens["prompt"] += int(j["prompt_tokens"])
        tokens["completion"] += int(j["completion_tokens"])
        if j["finished_at"] is not None:
            finished = j["finished_at"].timestamp()
            last_finish = max(last_finish, finished - t0)
            latency = finished - accepted_at
            completion_all.append(latency)
            entry["completion"].append(latency)
            if j["state"] == "SUCCEEDED":
                entry["completed"] += 1
                if j["finished_at"] <= j["deadline_at"]:
                    goodput += 1
    completed = by_state.get("SUCCEEDED", 0)
    review = by_state.get("REVIEW_REQUIRED", 0)
    failed = by_state.get("FAILED_TERMINAL", 0)
    pending = sum(
        n
        for s, n in by_state.items()
        if s not in ("SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL")
    )
    # Internal consistency: the database holds exactly the jobs intake admitted,
    # and each is in exactly one bucket.
    if len(jobs) != admitted or completed + review + failed + pending != admitted:
        raise InconsistentRun(
            f"{admitted} admitted, {len(jobs)} jobs in the database: completed {completed} "
            f"+ review {review} + failed {failed} + pending {pending}"
        )
    elapsed = max(last_finish, arrivals_done)
    tenants_out = {}
    for name, e in per_tenant.items():
        tenants_out[name] = {
            "weight": e["weight"],
            "admitted": e["admitted"],
            "completed": e["completed"],
            "completion_latency_s": _quantiles(e["completion"]),
        }
    fairness = jain_index(
        [e["completed"] / e["weight"] for e in per_tenant.values() if e["admitted"]]
    )
    result: dict[str, Any] = {
        "scenario": scenario.model_dump(mode="json"),
        "requests": {
            "scheduled": len(gen.sends),
            "sent": gen.sent,
            "admitted": admitted,
            "rejected": state.rejected,
            "loadgen_lag_s": lag_stats(gen.sends),
        },
        "outcomes": {
            "admitted": admitted,
            "completed": completed,
            "review_required": review,
            "failed": failed,
            "pending": pending,
            "goodput_jobs": goodput,
        },
        "duration_s": {"arrivals": arrivals_done, "last_settled": last_finish, "elapsed": elapsed},
        "request_throughput": admitted / arrivals_done if arrivals_done > 0 else math.nan,
        "goodput_per_s": goodput / elapsed if elapsed > 0 else math.nan,
        "acceptance_latency_s": _quantiles(state.acceptance_latency),
        "completion_latency_s": _quantiles(completion_all),
        "tenants": tenants_out,
        "jain_fairness": fairness,
        "attempts_per_job": sum(attempts) / len(attempts) if attempts else math.nan,
        "provider_calls": len(calls),
        "provider_calls_per_job": len(calls) / admitted if admitted else math.nan,
        "provider_outcomes": _count(c.outcome for c in calls),
        "provider_max_concurrency": max_overlap([(c.at, c.at + c.latency_s) for c in calls]),
        "provider_latency_s": _quantiles([c.latency_s for c in calls if c.outcome == "ok"]),
        "tokens": {**tokens, "total_per_s": sum(tokens.values()) / elapsed if elapsed else 0},
        "driver_outcomes": _merge([lp.stats.outcomes for lp in loops]),
        "samples": [s.__dict__ for s in state.samples],
        "finish_times_s": sorted(
            j["finished_at"].timestamp() - t0 for j in jobs if j["finished_at"] is not None
        ),
        "acceptance_latencies_s": state.acceptance_latency,
        "completion_latencies_s": completion_all,
    }
    if scenario.capacity_check:
        result["capacity"] = capacity_check(scenario, corpus, admitted, last_finish, calls)
    return result


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (concurrent provider calls)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = cur = 0
    for _, step in events:
        cur += step
        best = max(best, cur)
    return best


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def _merge(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def capacity_check(
    scenario: Scenario,
    corpus: list[GeneratedInvoice],
    admitted: int,
    measured_drain_s: float,
    calls: list[Any],
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


def summary(result: dict[str, Any]) -> str:
    """The one-screen text summary of a run."""
    o, a, c = result["outcomes"], result["acceptance_latency_s"], result["completion_latency_s"]
    lines = [
        f"scenario {result['scenario']['name']}: {result['requests']['scheduled']} scheduled, "
        f"{o['admitted']} admitted, rejected {result['requests']['rejected'] or 0}",
        f"outcomes  completed {o['completed']}  review {o['review_required']}  failed "
        f"{o['failed']}  pending {o['pending']}  (goodput {o['goodput_jobs']} in deadline)",
        f"duration  arrivals {result['duration_s']['arrivals']:.1f}s  last settled "
        f"{result['duration_s']['last_settled']:.1f}s",
        f"request throughput {result['request_throughput']:.2f}/s  goodput "
        f"{result['goodput_per_s']:.2f} jobs/s",
        f"acceptance latency  p50 {a['p50'] * 1000:.1f} ms  p95 {a['p95'] * 1000:.1f} ms  "
        f"p99 {a['p99'] * 1000:.1f} ms",
        f"completion latency  p50 {c['p50']:.2f} s  p95 {c['p95']:.2f} s  p99 {c['p99']:.2f} s",
        f"attempts/job {result['attempts_per_job']:.3f}  provider calls/job "
        f"{result['provider_calls_per_job']:.3f}  Jain fairness {result['jain_fairness']:.3f}",
        f"tokens prompt {result['tokens']['prompt']}  completion "
        f"{result['tokens']['completion']}  loadgen max lag "
        f"{result['requests']['loadgen_lag_s']['max_lag_s'] * 1000:.1f} ms",
    ]
    for name, t in result["tenants"].items():
        q = t["completion_latency_s"]
        lines.append(
            f"  tenant {name:<10} w={t['weight']:g} admitted {t['admitted']} completed "
            f"{t['completed']}  p50 {q['p50']:.2f}s p95 {q['p95']:.2f}s p99 {q['p99']:.2f}s"
        )
    if "capacity" in result:
        cap = result["capacity"]
        lines.append(
            f"capacity model: predicted drain {cap['predicted_drain_s']:.1f}s "
            f"({cap['prediction']['bound_by']}-bound, {cap['prediction']['job_capacity']:.2f} "
            f"jobs/s), measured {cap['measured_drain_s']:.1f}s, error {cap['error'] * 100:+.1f}%"
        )
    return "\n".join(lines)


def write_plots(out_dir: Path, result: dict[str, Any]) -> list[Path]:
    """Latency CDFs, backlog and throughput over time, per-tenant completion."""
    paths: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, key in (
        ("acceptance", "acceptance_latencies_s"),
        ("completion", "completion_latencies_s"),
    ):
        values = sorted(result[key])
        if values:
            ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("Latency CDF")
    ax.legend()
    paths.append(_save(fig, out_dir / "latency_cdf.png"))

    samples = result["samples"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ts = [s["t"] for s in samples]
    ax.plot(ts, [s["runnable"] for s in samples], label="runnable")
    ax.plot(ts, [s["running"] for s in samples], label="running")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("jobs")
    ax2 = ax.twinx()
    ax2.plot(ts, [s["oldest_runnable_age_s"] for s in samples], "k:", label="oldest age (s)")
    ax2.set_ylabel("oldest runnable age (s)")
    ax.set_title("Backlog over time")
    ax.legend(loc="upper left")
    paths.append(_save(fig, out_dir / "backlog.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    finishes = result["finish_times_s"]
    if finishes:
        width = max(1.0, math.ceil(finishes[-1] / 60))
        bins = [i * width for i in range(int(finishes[-1] // width) + 2)]
        ax.hist(finishes, bins=bins, weights=[1 / width] * len(finishes))
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("settled jobs / s")
    ax.set_title("Throughput over time")
    paths.append(_save(fig, out_dir / "throughput.png"))

    names = list(result["tenants"])
    paths.append(
        bar_plot(
            out_dir,
            "tenant_completion",
            "Completed jobs per tenant",
            names,
            [float(result["tenants"][n]["completed"]) for n in names],
            "jobs",
        )
    )
    return paths


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__" and sys.argv[1:2] == ["fake-provider"]:
    serve_fake_provider(int(sys.argv[2]), sys.argv[3])
elif __name__ == "__main__" and sys.argv[1:2] == ["intake"]:
    serve_intake(int(sys.argv[2]), sys.argv[3])
