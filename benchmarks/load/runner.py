"""Run a scenario: open-loop REST intake → durable jobs → real drivers → engine → ERP.

One run stands up, on loopback:

* a fresh PostgreSQL database (created, migrated, dropped after the run);
* the intake API (:func:`pipeline.api.app.create_app`) under uvicorn in its own process;
* ``drivers.count`` :class:`pipeline.worker.loop.DriverLoop` s woken by one
  :class:`pipeline.messaging.scheduler.Scheduler`, all asking one in-process
  :class:`cluster.admission.AdmissionActor` (through the
  :class:`cluster.admission.ActorGate` Ray drivers use) for RPM/TPM/concurrency;
* the engine (:class:`benchmarks.engines.bench_engine.BenchEngine`: the fake provider
  in its own process, or vLLM pools behind Ray Serve);
* with delivery on, one webhook endpoint per tenant, the reference ERP
  receiver (``benchmarks.erp_receiver``) and the delivery dispatcher.

Load comes from :class:`benchmarks.load.generator.OpenLoopGenerator`, so a saturated
pipeline shows up as backlog growth, not as a slower client. A whole scenario
(this main run, then its baselines) is :func:`benchmarks.load.suite.run_scenario`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from benchmarks.engines.bench_engine import BenchEngine, RecordingEngine, close_engine
from benchmarks.engines.metrics import ABSENT, note_peaks, pool_summary, side_summary
from benchmarks.infra import ErpProcess, free_port, fresh_database, intake_server
from benchmarks.invoices.generator import GeneratedInvoice
from benchmarks.load.client_process import Answer, ClientPlan, ClientProcess, Post
from benchmarks.load.collect import RunRecord, RunState, collect, merge_counts, sampler
from benchmarks.load.generator import OpenLoopGenerator, schedule
from benchmarks.load.plant_run import ERP_EVENTS, score_run, send_credit_notes
from benchmarks.load.plants import Plant, plan_plants, planted_in_stream, tenant_assignment
from benchmarks.scenario import Scenario, scenario_corpus
from cluster.admission import ActorGate, AdmissionActor, AdmissionClient, LocalActorHandle
from pipeline.admission import AdmissionConfig
from pipeline.database import create_pool
from pipeline.delivery import job_store
from pipeline.documents.stores import open_document_store
from pipeline.jobs import JobStore
from pipeline.messaging import Scheduler, SchedulerConfig, WorkSignal
from pipeline.process_heap import freeze_startup_heap
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import create_api_key, create_tenant, permit_currencies, upsert_supplier
from pipeline.validation import policy_for
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig

#: Concurrent intake requests on the wire (a client's connection limit).
CLIENT_CONNECTIONS = 16


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _settings_overrides(
    scenario: Scenario, dsn: str, erp_port: int | None, state_dir: str
) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "database_url": dsn,
        # Uploaded files (the planted credit notes' XML): intake stores, drivers read.
        "state_dir": state_dir,
        "scan_interval_seconds": 0.5,
        "default_deadline_seconds": scenario.deadline_s,
        "max_attempts": scenario.max_attempts,
        # Intake queues for a pooled connection instead of answering 503 after
        # 5 s: on a loaded machine a burst should measure latency, not timeouts.
        "db_pool_max": 16,
        # ...and opens them all at start, as a deployed intake does (fenceline up,
        # the KubeRay ConfigMap): a burst's first accepts do not connect.
        "db_pool_min": 16,
        "db_acquire_timeout_seconds": 60,
        # Requests cycle through the scenario's corpus, so the same supplier invoice
        # arrives many times by design: each is a distinct job of the load model,
        # not a duplicate to hold for review (the ERP below posts them all). A
        # scenario with duplicate_protection (and a corpus as large as its
        # arrivals) measures the pipeline with the protection on.
        "duplicate_invoice_check": scenario.duplicate_protection,
    }
    if erp_port is not None:
        overrides["delivery_allow_loopback_http"] = True
        overrides["delivery_allowed_ports"] = [443, erp_port]
    return overrides


async def _provision(
    conn: asyncpg.Connection, scenario: Scenario, corpus: list[GeneratedInvoice]
) -> list[tuple[str, str, uuid.UUID]]:
    """Tenants, API keys and (consistent) supplier master data; (name, key, id) per tenant."""
    out = []
    for spec in scenario.tenants:
        tenant = await create_tenant(
            conn, f"{spec.name}-{uuid.uuid4().hex[:6]}", weight=max(1, round(spec.weight))
        )
        _, key = await create_api_key(conn, tenant.id, scopes=("jobs",))
        out.append((spec.name, key, tenant.id))
        for inv in corpus:
            await upsert_supplier(conn, tenant.id, inv.supplier)
        await permit_currencies(conn, tenant.id, {inv.currency for inv in corpus})
    return out


async def run_pipeline(
    scenario: Scenario, engine: BenchEngine, *, progress: bool = True
) -> dict[str, Any]:
    """The main run on an already started engine; returns the collected result."""
    offsets = schedule(scenario.arrival, scenario.seed)
    corpus = scenario_corpus(scenario)
    tenant_of = tenant_assignment(scenario, len(offsets))
    plants = plan_plants(scenario, corpus, len(offsets))
    fake_calls_before = len(await engine.fake.calls()) if engine.fake is not None else 0
    core_before = await engine.metrics_snapshot()
    erp_port = free_port() if scenario.delivery.enabled else None
    async with fresh_database() as dsn, _state_dir() as state_dir:
        overrides = _settings_overrides(scenario, dsn, erp_port, state_dir)
        settings = Settings(**overrides)
        # The drivers' connections open before the burst, as each driver process opens
        # its pool at start (cluster.drivers.DRIVER_POOL each).
        pool = await create_pool(dsn, min_size=12, max_size=20)
        erp: ErpProcess | None = None
        dispatcher: Any = None
        try:
            async with pool.acquire() as conn:
                tenants = await _provision(conn, scenario, corpus)
            if erp_port is not None:
                from cluster.delivery import build_dispatcher
                from pipeline.delivery import EndpointRegistry, SecretBox, guard_from_settings

                erp = ErpProcess(dsn, erp_port)
                registry = EndpointRegistry(pool, guard_from_settings(settings), SecretBox(None))
                secrets = [
                    (
                        await registry.register(
                            tid, erp.url, description="bench ERP", event_types=ERP_EVENTS
                        )
                    ).secret
                    for _, _, tid in tenants
                ]
                await erp.start(secrets)
                dispatcher = build_dispatcher(pool, settings, worker_id="bench-delivery")
                await dispatcher.start()
            intake = {k: v for k, v in overrides.items() if k in _INTAKE_FIELDS}
            peaks: dict[str, float] = {}
            watch = asyncio.create_task(_watch_kv(engine, peaks, scenario.sample_every_s))
            try:
                record = await _drive(
                    scenario, settings, intake, pool, engine, corpus, offsets, tenant_of, tenants,
                    plants, progress,
                )  # fmt: skip
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            if dispatcher is not None:
                await _wait_deliveries(pool, scenario.delivery.timeout_s)
            if engine.fake is not None:
                record.fake_calls = (await engine.fake.calls())[fake_calls_before:]
            record.delivery_enabled = erp is not None
            result = await collect(pool, record)
            if plants:
                result["plants"] = await score_run(pool, plants, record)
            core_after = await engine.metrics_snapshot()
            if core_before is not None and core_after is not None:
                result["engine"]["engine_core"] = side_summary(core_before, core_after)
                result["engine"]["pools"] = pool_summary(core_before, core_after, peaks)
            else:
                result["engine"]["pools"] = ABSENT
            return result
        finally:
            if dispatcher is not None:
                await dispatcher.close()
            if erp is not None:
                await erp.stop()
            await pool.close()


@contextlib.asynccontextmanager
async def _state_dir() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="fenceline-bench-") as path:
        yield path


async def _watch_kv(engine: BenchEngine, peaks: dict[str, float], every: float) -> None:
    """Sample each pool's KV-cache usage while the run goes (vLLM engines only)."""
    if engine.fake is not None:
        return
    while True:
        try:
            snapshot = await engine.metrics_snapshot()
        except Exception as exc:  # a replica restarting: the next sample may answer
            log(f"engine metrics unavailable: {exc!r}")
            snapshot = None
        if snapshot is not None:
            note_peaks(snapshot, peaks)
        await asyncio.sleep(max(every, 0.5))


async def _wait_deliveries(pool: asyncpg.Pool, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with pool.acquire() as conn:
            if await conn.fetchval(q("bench_deliveries_unfinished")) == 0:
                return
        await asyncio.sleep(0.25)


def _progress_line(state: RunState, gen: OpenLoopGenerator, total: int) -> None:
    s = state.samples[-1] if state.samples else None
    line = (
        f"\r[{time.time() - state.t0_wall:6.1f}s] sent {gen.sent}/{total} "
        f"accepted {len(state.accepted)} settled {s.settled if s else 0} "
        f"runnable {s.runnable if s else 0} running {s.running if s else 0} "
        f"oldest {s.oldest_runnable_age_s if s else 0:.1f}s   "
    )
    print(line, end="", file=sys.stderr, flush=True)


def _drivers(
    scenario: Scenario,
    settings: Settings,
    store: JobStore,
    engine: RecordingEngine,
    gate: ActorGate,
    signal: WorkSignal,
) -> list[DriverLoop]:
    spec = scenario.engine
    return [
        DriverLoop(
            AttemptRunner(
                store,
                engine,
                WorkerConfig(
                    worker_id=f"bench-driver-{i}",
                    concurrency=scenario.drivers.concurrency,
                    claim_batch=scenario.drivers.concurrency,
                    attempt_timeout_seconds=spec.attempt_timeout_s,
                    max_output_tokens=spec.max_output_tokens,
                    heartbeat_seconds=settings.heartbeat_seconds,
                    idle_poll_seconds=0.5,
                ),
                admission=gate,
                policy=policy_for(settings),
                documents=open_document_store(settings),
            ),
            signal=signal,
        )
        for i in range(scenario.drivers.count)
    ]


async def _drive(
    scenario: Scenario,
    settings: Settings,
    intake_overrides: dict[str, Any],
    pool: asyncpg.Pool,
    bench_engine: BenchEngine,
    corpus: list[GeneratedInvoice],
    offsets: list[float],
    tenant_of: list[int],
    tenants: list[tuple[str, str, uuid.UUID]],
    plants: list[Plant],
    progress: bool,
) -> RunRecord:
    state = RunState()
    # As cluster.drivers.TaskDriver does: deliveries commit with the completion.
    store = job_store(pool, settings) if scenario.delivery.enabled else JobStore(pool, settings)
    adm = scenario.admission
    scope = f"bench-{scenario.name}"
    actor = AdmissionActor(
        AdmissionConfig(scope=scope, rpm=adm.rpm, tpm=adm.tpm, max_in_flight=adm.concurrency)
    )
    gate = ActorGate(AdmissionClient(LocalActorHandle(actor), scope=scope))
    engine = RecordingEngine(bench_engine.engine())
    signal = WorkSignal()
    scheduler = Scheduler(pool, settings, signal, config=SchedulerConfig(scan_interval_seconds=0.5))
    loops = _drivers(scenario, settings, store, engine, gate, signal)
    stop_sampling = asyncio.Event()
    job_of: dict[int, str] = {}
    credit_jobs: dict[int, str] = {}
    arrivals_over = asyncio.Event()
    replaced = {p.index: len(corpus) + k for k, p in enumerate(planted_in_stream(plants))}

    # The client runs in its own process (benchmarks.load.client_process): it is outside
    # the system, and in this one its HTTP work would share the drivers' event loop.
    def on_answer(answer: Answer) -> None:
        if answer.outcome == "accepted" and answer.job_id is not None:
            assert answer.latency_s is not None
            state.acceptance_latency.append(answer.latency_s)
            state.accepted[answer.job_id] = (tenants[tenant_of[answer.index]][0], answer.wall)
            job_of[answer.index] = answer.job_id
        elif answer.outcome == "rejected":
            key = str(answer.status)
            state.rejected[key] = state.rejected.get(key, 0) + 1

    async with intake_server(intake_overrides) as url:
        client = ClientProcess(
            ClientPlan(
                url=url,
                connections=CLIENT_CONNECTIONS,
                wait_timeout_s=scenario.drain_timeout_s,
                texts=[inv.ocr_text for inv in corpus]
                + [p.text for p in planted_in_stream(plants)],
                posts=[
                    Post(
                        offset=offset,
                        bearer=tenants[tenant_of[i]][1],
                        idempotency_key=f"bench-{i}",
                        text=replaced.get(i, i % len(corpus)),
                    )
                    for i, offset in enumerate(offsets)
                ],
            ),
            on_answer,
            on_start=lambda wall: setattr(state, "t0_wall", wall),
        )
        gen = client.gen
        # As the supervisor does before drivers ask: the actor opens its ledger now,
        # not on the first attempt's acquire inside the measured window.
        await actor.start()
        await scheduler.start()
        for loop in loops:
            await loop.start()
        freeze_startup_heap()  # as a driver process does once started (cluster/drivers.py)

        state.t0_wall = time.time()  # until the client's schedule starts (on_start)
        sampling = asyncio.create_task(
            sampler(store, state, scenario.sample_every_s, stop_sampling)
        )
        reporter: asyncio.Task[None] | None = None
        if progress:

            async def report() -> None:
                while True:
                    _progress_line(state, gen, len(offsets))
                    await asyncio.sleep(1.0)

            reporter = asyncio.create_task(report())
        credits = asyncio.create_task(
            send_credit_notes(
                url, pool, plants, job_of, tenant_of, tenants, state, credit_jobs, arrivals_over
            )
        )
        try:
            await client.run()
            arrivals_done = time.time() - state.t0_wall
            arrivals_over.set()
            deadline = time.monotonic() + scenario.drain_timeout_s
            while time.monotonic() < deadline:
                async with pool.acquire() as conn:
                    settled = await conn.fetchval(q("bench_settled_count"))
                if credits.done() and settled >= len(state.accepted):
                    break
                await asyncio.sleep(0.25)
            await client.cancel()
        finally:
            arrivals_over.set()
            credits.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await credits
            stop_sampling.set()
            await sampling
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
                print(file=sys.stderr)
            for loop in loops:
                await loop.stop(grace_seconds=5)
            await scheduler.stop()
            await actor.stop()
            await close_engine(engine)
    return RunRecord(
        scenario=scenario,
        corpus=corpus,
        state=state,
        gen=gen,
        arrivals_done=arrivals_done,
        engine_calls=engine.calls,
        engine_streams=bench_engine.streams,
        driver_outcomes=merge_counts([lp.stats.outcomes for lp in loops]),
        job_of=job_of,
        credit_jobs=credit_jobs,
    )


#: Settings the intake process needs (it never delivers or calls an engine).
_INTAKE_FIELDS = {
    "database_url",
    "scan_interval_seconds",
    "default_deadline_seconds",
    "max_attempts",
    "db_pool_max",
    "db_pool_min",
    "db_acquire_timeout_seconds",
    "state_dir",
}
