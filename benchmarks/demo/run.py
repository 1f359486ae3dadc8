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

Demo seeds: invoice ``i`` is generator seed ``DemoOptions.seed + i`` (2026 ..
2033 by default), dated shortly before :data:`DEMO_ANCHOR`, a fixed day: the
same code prints the same pages, and shows the same outcome, whatever day it
runs (:func:`demo_anchor` moves to today only once that day's invoices would be
too old for the validation policy, and says so). Seeds from
:data:`TRAINING_SEEDS_FROM` up are reserved for adapter training, so the demo
refuses them (it must never show an invoice the model was trained on).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.demo.documents import DemoDocument, demo_documents
from benchmarks.demo.erp import (
    ErpPostings,
    create_erp_database,
    erp_database_url,
    join_postings,
    read_erp_postings,
)
from benchmarks.demo.progress import engine_token_reader, watch
from benchmarks.demo.rows import InvoiceRow, build_row, summarise_rows
from benchmarks.demo.view import format_summary, format_table, plot_invoices
from benchmarks.infra import free_port
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
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
from pipeline.validation import DEFAULT_POLICY, ValidationPolicy
from pipeline.worker import WorkerConfig

if TYPE_CHECKING:
    import asyncpg

    from pipeline.data_keys import DataKeys

DEMO_DATABASE = "fenceline_demo"
TENANTS = (("acme-gmbh", 2), ("globex-ltd", 1), ("initech-sa", 1))
#: Every 4th invoice is adversarial, in this order. Both are printed into the
#: document, so even a faithful transcription must go to REVIEW_REQUIRED (a
#: prompt injection is not here: a model that ignores it rightly SUCCEEDS).
ADVERSARIAL = (Variant.ARITHMETIC_OFF_BY_CENT, Variant.HOMOGLYPH_SUPPLIER)
#: Generator seeds from here up are reserved for adapter training.
TRAINING_SEEDS_FROM = 1_000_000
MAX_DEMO_LINE_ITEMS = 8
#: One attempt's limit: the demo's batch of answers on CPU, with room to spare.
ATTEMPT_TIMEOUT_S = 900.0
#: The day the demo's invoices are dated just before (20-59 days; see
#: ``benchmarks.invoices.plan``). Fixed, so a run's outcome depends on the code
#: and not on the calendar: with a moving anchor, seed 2029 printed "21 października
#: 2026" on one day and "20 października 2026" the day before, and SmolLM2 read the
#: two pages differently. The day of the last recorded 8/8 run (docs/history/benchmarks-passes.md).
DEMO_ANCHOR = date(2026, 12, 4)
#: The generator dates an invoice at most this many days before its anchor.
ANCHOR_LEAD_DAYS = 59


@dataclass(frozen=True)
class DemoOptions:
    invoices: int = 8
    max_line_items: int = 3
    drivers: int = 2
    driver_concurrency: int = 4
    timeout_s: float = 1200.0
    out_dir: Path = Path("results/demo")
    seed: int = 2026
    #: Keep the cluster (and the review console) up after the report until Ctrl-C.
    keep: bool = False
    #: Date the invoices shortly before this day; None: today.
    anchor: date | None = DEMO_ANCHOR


def demo_anchor(
    opts: DemoOptions, today: date, policy: ValidationPolicy = DEFAULT_POLICY
) -> tuple[date, str | None]:
    """The day to date the demo's invoices before, and why it is not the one asked for.

    The drivers validate against the real clock, so every issue date must lie within
    the policy's window around ``today``: an anchor whose oldest invoice would be
    older than ``max_invoice_age_days``, or one after today, gives way to today.
    """
    if opts.anchor is None:
        return today, None
    oldest = opts.anchor - timedelta(days=ANCHOR_LEAD_DAYS)
    if oldest < today - timedelta(days=policy.max_invoice_age_days):
        return today, (
            f"invoices dated before {opts.anchor} would be over "
            f"{policy.max_invoice_age_days} days old today: dated before today ({today}) "
            "instead, so the outcome may differ from the recorded one"
        )
    if opts.anchor > today:
        return today, f"{opts.anchor} is after today: invoices dated before today ({today})"
    return opts.anchor, None


def corpus(opts: DemoOptions, anchor: date | None = None) -> list[tuple[str, GeneratedInvoice]]:
    """Invoices assigned to tenants: the first tenant gets a backlog, the others a few each.

    Six of the default eight are clean; invoices 4 and 8 (seeds 2029, 2033) are
    an arithmetic off by a cent and a homoglyph supplier name (invoice 4 is sent as a
    scan and invoice 5 as a PDF: :mod:`benchmarks.demo.documents`). Dated before
    ``anchor``, by default :func:`demo_anchor`'s day for today.
    """
    if opts.seed < 0 or opts.seed + opts.invoices > TRAINING_SEEDS_FROM:
        raise ValueError(
            f"demo seeds {opts.seed}..{opts.seed + opts.invoices - 1} must stay below "
            f"{TRAINING_SEEDS_FROM:_} (reserved for adapter training)"
        )
    if not 1 <= opts.max_line_items <= MAX_DEMO_LINE_ITEMS:
        raise ValueError(f"max_line_items must be 1..{MAX_DEMO_LINE_ITEMS}")
    if anchor is None:
        anchor, _ = demo_anchor(opts, datetime.now(UTC).date())
    out = []
    for i in range(opts.invoices):
        variant = ADVERSARIAL[(i // 4) % len(ADVERSARIAL)] if i % 4 == 3 else Variant.CLEAN
        inv = generate_invoice(
            opts.seed + i, variant, max_line_items=opts.max_line_items, anchor=anchor
        )
        tenant = TENANTS[0][0] if i % 2 == 0 else TENANTS[1 + (i // 2) % 2][0]
        out.append((tenant, inv))
    return out


#: What the demo's console keys may do: review and correct, and see the dashboard.
CONSOLE_SCOPES = ("jobs", "operator", "review")


def review_key_name(tenant: str) -> str:
    """Where :func:`provision` puts a tenant's console key in its ``keys``."""
    return f"review:{tenant}"


def console_lines(
    intake_url: str, review_keys: dict[str, str], work: list[tuple[str, GeneratedInvoice]]
) -> list[str]:
    """The console's URL and each tenant's console key, with how many of its invoices
    a faithful reading sends to review (those wait there after the run)."""
    expected = Counter(t for t, inv in work if inv.truth_decision.value == "REVIEW_REQUIRED")
    lines = [f"console: {intake_url}/console  (sign in with the tenant's review key)"]
    for tenant, key in review_keys.items():
        lines.append(
            f"  {tenant:<12} {key}  ({expected.get(tenant, 0)} invoice(s) expected in review)"
        )
    return lines


async def provision(
    settings: Settings, erp_url: str, work: list[tuple[str, GeneratedInvoice]]
) -> tuple[dict[str, str], list[str]]:
    """Tenants, API keys, supplier master data and webhook endpoints; returns keys, secrets.

    Besides its ``jobs`` key (``keys[name]``), every tenant gets a console key with the
    ``review`` and ``operator`` scopes (``keys[review_key_name(name)]``): the console is
    tenant-scoped, and the invoices expected to go to review belong to whichever
    tenant the corpus gives them, so one tenant's key would not show them all.
    """
    from pipeline.data_keys import DataKeys
    from pipeline.database import create_pool
    from pipeline.delivery import EndpointRegistry, SecretBox, guard_from_settings
    from pipeline.tenants import create_api_key, create_tenant, permit_currencies, upsert_supplier

    keys: dict[str, str] = {}
    secrets: list[str] = []
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        registry = EndpointRegistry(pool, guard_from_settings(settings), SecretBox(None))
        ids = {}
        async with pool.acquire() as conn:
            for name, weight in TENANTS:
                t = await create_tenant(conn, name, weight=weight)
                ids[name] = t.id
                keys[name] = (await create_api_key(conn, t.id))[1]
                keys[review_key_name(name)] = (
                    await create_api_key(conn, t.id, scopes=CONSOLE_SCOPES)
                )[1]
            sealing = DataKeys.from_settings(settings)  # the register's IBANs sealed at rest
            for tenant, inv in work:
                await upsert_supplier(conn, ids[tenant], inv.supplier, keys=sealing)
                await permit_currencies(conn, ids[tenant], [inv.currency])
        for name, _ in TENANTS:
            issued = await registry.register(ids[name], erp_url, description="demo ERP")
            secrets.append(issued.secret)
    finally:
        await pool.close()
    return keys, secrets


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
        result = asyncio.run(_summarise(settings, erp_dsn, accepted, counts, truths))
        result["driver_stats"] = cluster.driver_stats()
        if opts.keep:
            result["wall_seconds"] = time.monotonic() - started
            _report(result, opts.out_dir)
            result["reported"] = True
            _keep_serving(console)
    finally:
        cluster.stop()
        erp.terminate()
        erp.wait(10)
    if not result.pop("reported", False):
        result["wall_seconds"] = time.monotonic() - started
        _report(result, opts.out_dir)
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


async def invoice_rows(
    conn: asyncpg.Connection, keys: DataKeys, postings: ErpPostings
) -> dict[Any, dict[str, Any]]:
    """The ``report_invoice_rows`` rows by job id, each result's sealed text opened
    (:mod:`pipeline.sealed_results`; one that does not open is marked, not raised),
    with what the ERP recorded for the job (``postings``, read from its database)."""
    from pipeline.sealed_results import UNREADABLE, open_result, open_validation

    rows = {r["id"]: dict(r) for r in await conn.fetch(q("report_invoice_rows"))}
    join_postings(rows, postings)
    for row in rows.values():
        if isinstance(row["result"], dict):
            row["result"] = await open_result(
                keys, conn, row["tenant_id"], row["id"], row["result"], mark=UNREADABLE
            )
        if isinstance(row.get("validation"), dict):
            row["validation"] = await open_validation(
                keys, conn, row["tenant_id"], row["id"], row["validation"], mark=UNREADABLE
            )
    return rows


async def _summarise(
    settings: Settings,
    erp_dsn: str,
    accepted: list[dict[str, Any]],
    counts: dict[str, int],
    truths: list[dict[str, Any]],
) -> dict[str, Any]:
    from benchmarks.report import percentile
    from pipeline.data_keys import DataKeys

    keys = DataKeys.from_settings(settings)
    erp = await read_erp_postings(erp_dsn)  # the ERP's own database
    postings, dup = erp.postings, erp.duplicates_absorbed
    conn = await connect(settings.database_url)
    try:
        jobs = {str(r["id"]): r for r in await conn.fetch(q("report_job_outcomes"))}
        usage = await conn.fetchrow(q("report_attempt_usage"))
        deliveries = {r["state"]: r["n"] for r in await conn.fetch(q("report_delivery_counts"))}
        rows = {str(k): r for k, r in (await invoice_rows(conn, keys, erp)).items()}
    finally:
        await conn.close()
    per_tenant: dict[str, Counter[str]] = defaultdict(Counter)
    latencies: list[float] = []
    for a in accepted:
        j = jobs[a["job_id"]]
        per_tenant[j["tenant"]][j["state"]] += 1
        a["state"] = j["state"]
        a["attempts"] = j["attempt"]
        if j["finished_at"] is not None:
            latencies.append((j["finished_at"] - j["created_at"]).total_seconds())
    accept_ms = [a["accept_ms"] for a in accepted]
    invoices = [
        build_row(i, a, rows.get(a["job_id"], {}), truth)
        for i, (a, truth) in enumerate(zip(accepted, truths, strict=True), start=1)
    ]
    return {
        "invoices": invoices,
        "states": counts,
        "per_tenant": {k: dict(v) for k, v in per_tenant.items()},
        "jobs": accepted,
        "accept_ms": {"p50": percentile(accept_ms, 50), "p99": percentile(accept_ms, 99)},
        "completion_s": {p: percentile(latencies, float(p[1:])) for p in ("p50", "p95", "p99")},
        "tokens": {"prompt": usage["prompt"], "completion": usage["completion"]},
        "attempts": usage["attempts"],
        "uncertain_attempts": usage["uncertain"],
        "deliveries": deliveries,
        "erp_postings": postings,
        "erp_duplicate_deliveries_seen": dup,
        "decision_matches_expected": sum(1 for a in accepted if a["state"] == a["expected"]),
    }


def _report(result: dict[str, Any], out_dir: Path) -> None:
    from benchmarks.report import write_json

    if not result.get("jobs"):
        print("demo: no summary (the run did not get to submit jobs)")
        return
    rows: list[InvoiceRow] = result.pop("invoices")
    summary = summarise_rows(rows, result["wall_seconds"])
    result["invoices"] = [r.as_dict() for r in rows]
    result["summary"] = summary
    print("\n=== Fenceline demo summary ===")
    states = sorted({s for t in result["per_tenant"].values() for s in t})
    print(f"{'tenant':<14}" + "".join(f"{s:>17}" for s in states))
    for tenant, c in sorted(result["per_tenant"].items()):
        print(f"{tenant:<14}" + "".join(f"{c.get(s, 0):>17}" for s in states))
    cs = result["completion_s"]
    print(
        f"acceptance latency ms: p50 {result['accept_ms']['p50']:.1f}  "
        f"p99 {result['accept_ms']['p99']:.1f}"
    )
    print(f"accept -> settled s:   p50 {cs['p50']:.1f}  p95 {cs['p95']:.1f}  p99 {cs['p99']:.1f}")
    print(
        f"attempts: {result['attempts']} for {len(result['jobs'])} jobs "
        f"({result['uncertain_attempts']} uncertain)  tokens in/out "
        f"{result['tokens']['prompt']}/{result['tokens']['completion']}"
    )
    print(
        f"deliveries: {result['deliveries']}  ERP postings: {result['erp_postings']} "
        f"(one per SUCCEEDED job; duplicates absorbed: {result['erp_duplicate_deliveries_seen']})"
    )
    print("\n=== What was extracted, decided and posted (one row per invoice) ===")
    for line in format_table(rows):
        print(line)
    print(format_summary(summary))
    path = write_json(out_dir, "demo", result)
    png = plot_invoices(rows, summary, out_dir / "demo.png")
    print(f"report: {path}  plot: {png}")


def options_from(**kw: Any) -> DemoOptions:
    return replace(DemoOptions(), **{k: v for k, v in kw.items() if v is not None})
