"""``fenceline demo``: the main job end to end on the embedded default.

Synthetic invoices from several tenants (mostly clean, two adversarial; one sent as
a PDF and one as a scan, uploaded as files, :mod:`benchmarks.demo.documents`) go
through REST intake → job store → task drivers → admission → vLLM (Serve,
context-length routed) → validation → signed delivery to a local reference ERP
receiver. While jobs run, each state change prints as it happens and a progress
line (state counts, output tokens and tokens per second from the engines'
counters) every few seconds (:mod:`benchmarks.demo.progress`). The run ends with
one row per invoice: what was extracted (supplier, number, gross), the decision
next to the expected one with its reasons, how often the ERP posted it, and
whether the values equal the generator's truth (:mod:`benchmarks.demo.rows`,
:mod:`benchmarks.demo.view`), written to ``results/demo/demo.json`` (``invoices``)
and drawn in ``demo.png``. The database is a dedicated ``fenceline_demo``
(recreated each run so the numbers describe this run only) on the configured
server, or, when nothing answers at the default URL and none was set, on an
embedded PostgreSQL in the state folder (:mod:`cluster.embedded_postgres`). The
reference ERP, a system outside Fenceline, gets a database of its own beside it,
``fenceline_demo_erp`` (:mod:`benchmarks.demo.erp`).

Which invoices, for which tenants, dated before which day: :mod:`benchmarks.demo.corpus`;
the tenants' keys and master data: :mod:`benchmarks.demo.provision`; the summary:
:mod:`benchmarks.demo.report`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx

from benchmarks.demo.corpus import TENANTS, DemoOptions, corpus, demo_anchor
from benchmarks.demo.documents import DemoDocument, demo_documents
from benchmarks.demo.erp import create_erp_database, erp_database_url
from benchmarks.demo.progress import engine_token_reader, watch
from benchmarks.demo.provision import console_lines, provision, review_key_name
from benchmarks.demo.report import report, summarise
from benchmarks.infra import free_port
from benchmarks.invoices.generator import GeneratedInvoice
from cluster.embedded_postgres import local_database
from cluster.runtime import ClusterConfig, LocalCluster
from pipeline.database import connect, create_database, dsn_for, server_warnings
from pipeline.documents import ocr_languages
from pipeline.envelope import with_local_kek
from pipeline.errors import OcrUnavailable
from pipeline.jobs import admin_dsn
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import SETTLED
from pipeline.worker import WorkerConfig

DEMO_DATABASE = "fenceline_demo"
#: One attempt's limit: the demo's batch of answers on CPU, with room to spare.
ATTEMPT_TIMEOUT_S = 900.0


async def _submit(
    intake: str,
    keys: dict[str, str],
    work: list[tuple[str, GeneratedInvoice]],
    documents: list[DemoDocument],
) -> list[dict[str, Any]]:
    """Submit every invoice: its text as JSON, or its file as a ``multipart/form-data``
    upload, as a user's client would send a PDF or a scan."""
    accepted = []
    async with httpx.AsyncClient(base_url=intake, timeout=30) as client:
        for i, ((tenant, inv), doc) in enumerate(zip(work, documents, strict=True)):
            headers = {"Authorization": f"Bearer {keys[tenant]}", "Idempotency-Key": f"demo-{i}"}
            t0 = time.perf_counter()
            if doc.data is None:
                r = await client.post(
                    "/v1/extraction-jobs",
                    headers=headers,
                    json={"document": {"text": inv.ocr_text, "filename": doc.filename}},
                )
            else:
                r = await client.post(
                    "/v1/extraction-jobs",
                    headers=headers,
                    files={"document": (doc.filename, doc.data, doc.content_type)},
                )
            latency = time.perf_counter() - t0
            if r.status_code not in (200, 202):
                raise RuntimeError(f"intake refused invoice {i}: {r.status_code} {r.text}")
            body = r.json()
            accepted.append(
                {
                    "job_id": body["job_id"],
                    "tenant": tenant,
                    "seed": inv.seed,
                    "variant": inv.variant.value,
                    "document": doc.kind,
                    "filename": doc.filename,
                    # What validation must decide for a faithful reading of the page.
                    "expected": inv.truth_decision.value,
                    "accept_ms": latency * 1000,
                    "status": r.status_code,
                }
            )
    return accepted


async def _wait_deliveries(dsn: str, timeout: float) -> None:
    conn = await connect(dsn)
    try:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pending = await conn.fetchval(q("report_deliveries_unfinished"))
            if pending == 0:
                return
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


def run_demo(opts: DemoOptions, settings: Settings | None = None) -> int:
    """Run the demo; on a machine without PostgreSQL, on an embedded one (see
    :func:`cluster.embedded_postgres.local_database`)."""
    with local_database(settings or Settings()) as base:
        return _run_demo(opts, base)


def demo_settings(base: Settings) -> Settings:
    """The demo's settings: its own database on ``base``'s server, local ERP allowed."""
    admin, _ = admin_dsn(base.database_url)
    return base.model_copy(
        update={
            "database_url": dsn_for(admin, DEMO_DATABASE),
            "delivery_allow_loopback_http": True,  # local ERP only; logged as a warning
            "delivery_allowed_ports": (443, 80),
            "reaper_interval_seconds": 2.0,
            # One attempt per job on the CPU default: SmolLM2-135M either writes the
            # evidenced answer within the output cap or loops until it; a second
            # greedy attempt repeats the same output and doubles the run.
            "max_attempts": 1,
        }
    )


async def create_demo_database(settings: Settings) -> list[str]:
    """(Re)create the demo's database with every migration applied, and the reference
    ERP's beside it with only its own (:func:`benchmarks.demo.erp.create_erp_database`);
    return the server's maintenance warnings (:func:`pipeline.database.server_warnings`)."""
    admin, name = admin_dsn(settings.database_url)
    await create_erp_database(settings.database_url)
    conn = await connect(await create_database(admin, name, replace=True))
    try:
        return await server_warnings(conn)
    finally:
        await conn.close()


def _run_demo(opts: DemoOptions, base: Settings) -> int:
    settings = with_local_kek(demo_settings(base))  # invoice text sealed at rest
    dsn = settings.database_url
    erp_dsn = erp_database_url(dsn)
    started = time.monotonic()
    print(
        f"demo: database {dsn} (recreated; the ERP's: {erp_dsn}), {opts.invoices} invoices, "
        f"{len(TENANTS)} tenants, {opts.drivers} drivers"
    )
    for warning in asyncio.run(create_demo_database(settings)):
        print(f"demo: warning: {warning}")
    anchor, moved = demo_anchor(opts, datetime.now(UTC).date())
    print(f"demo: invoices dated shortly before {anchor}" + (f" ({moved})" if moved else ""))
    work = corpus(opts, anchor)
    documents = demo_documents(work)
    for i, doc in enumerate(documents, start=1):
        if doc.data is not None:
            inv = work[i - 1][1]
            print(f"demo: invoice {i} (seed {inv.seed} {inv.variant.value}) goes as {doc.detail}")
    if any(doc.kind == "scan" for doc in documents):
        try:
            ocr_languages(settings)
        except OcrUnavailable as exc:
            print(f"demo: a scan is among the invoices and OCR is unavailable: {exc}")
            return 1
    erp_port = free_port()
    erp_url = f"http://127.0.0.1:{erp_port}/webhooks/fenceline"
    settings = settings.model_copy(update={"delivery_allowed_ports": (443, erp_port)})
    keys, secrets = asyncio.run(provision(settings, erp_url, work))
    erp = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.erp_receiver",
            "--port",
            str(erp_port),
            "--database-url",
            erp_dsn,
        ],
        env={**os.environ, "FENCELINE_ERP_SECRETS": " ".join(secrets)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert erp.stdout is not None
    print(f"erp: reference receiver {erp.stdout.readline().strip()} (pid {erp.pid})")
    worker = WorkerConfig(
        worker_id="driver",
        concurrency=opts.driver_concurrency,
        claim_batch=opts.driver_concurrency,
        # All 8 answers share one OpenMP thread: each waits for the others' prefill, so
        # an attempt lasts as long as the whole batch. Measured on 2 cores with the adapter
        # (2026-12-01): 167-171 s on a quiet machine (prefill of 7,541 prompt tokens ~120 s,
        # then ~30 tok/s), and over 240 s, timing every attempt out, on a loaded one.
        attempt_timeout_seconds=ATTEMPT_TIMEOUT_S,
        max_output_tokens=1100,
        heartbeat_seconds=10,
    )
    cluster = LocalCluster(
        ClusterConfig(
            settings=settings,
            http_port=free_port(),  # never collide with another Serve proxy on 8000
            drivers=opts.drivers,
            worker=worker,
            # A batch of a few minutes never earns back torch.compile's ~47 s per engine.
            # The default pools: both served by one engine (pools.yaml, served_by).
            eager=True,
            admission={
                "max_in_flight": opts.drivers * opts.driver_concurrency,
                "grant_ttl_seconds": 900.0,
                "tenant_weights": {},
            },
        )
    )
    result: dict[str, Any] = {}
    try:
        cluster.start()
        t_submit = time.monotonic()
        review_keys = {name: keys.pop(review_key_name(name)) for name, _ in TENANTS}
        console = console_lines(cluster.intake_url, review_keys, work)
        print("\n".join(console))
        accepted = asyncio.run(_submit(cluster.intake_url, keys, work, documents))
        print(
            f"intake: {len(accepted)} invoices accepted (202) in "
            f"{time.monotonic() - t_submit:.2f} s"
        )
        counts = asyncio.run(
            watch(dsn, accepted, opts.timeout_s, t_submit, engine_token_reader(*_engines(cluster)))
        )
        asyncio.run(_wait_deliveries(dsn, 60))
        truths = [inv.truth.model_dump(mode="json") for _, inv in work]
        result = asyncio.run(summarise(settings, erp_dsn, accepted, counts, truths))
        result["driver_stats"] = cluster.driver_stats()
        if opts.keep:
            result["wall_seconds"] = time.monotonic() - started
            report(result, opts.out_dir)
            result["reported"] = True
            _keep_serving(console)
    finally:
        cluster.stop()
        erp.terminate()
        erp.wait(10)
    if not result.pop("reported", False):
        result["wall_seconds"] = time.monotonic() - started
        report(result, opts.out_dir)
    settled = sum(result.get("states", {}).get(s.value, 0) for s in SETTLED)
    return 0 if settled == len(work) else 1


def _keep_serving(console: list[str]) -> None:
    """``--keep``: leave the cluster up so the REVIEW_REQUIRED jobs wait in the console
    (nothing in the cluster decides a review on its own: they wait for a reviewer)."""
    print("\ndemo --keep: the cluster stays up.\n" + "\n".join(console))
    print("  Ctrl-C stops the cluster.")
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("stopping")


def _engines(cluster: LocalCluster) -> tuple[str, list[str]]:
    """The inference app's name and its engine deployments, which count the tokens."""
    pools = cluster.config.serve_pools()
    return pools.app_name, pools.engine_deployments()


def options_from(**kw: Any) -> DemoOptions:
    return replace(DemoOptions(), **{k: v for k, v in kw.items() if v is not None})
