"""The demo's summary: what each job decided, what the ERP posted, what the engines
spent, printed as a table and written to ``results/demo/demo.json`` with its plot
(:mod:`benchmarks.demo.rows`, :mod:`benchmarks.demo.view`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.demo.erp import ErpPostings, join_postings, read_erp_postings
from benchmarks.demo.rows import InvoiceRow, build_row, summarise_rows
from benchmarks.demo.view import format_summary, format_table, plot_invoices
from pipeline.database import connect
from pipeline.queries import q
from pipeline.settings import Settings

if TYPE_CHECKING:
    import asyncpg

    from pipeline.data_keys import DataKeys


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


async def summarise(
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


def report(result: dict[str, Any], out_dir: Path) -> None:
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
