"""``fenceline explain``: everything one job went through, read in one place.

"Acceptance means every admitted job remains explainable" (spec). The job row
alone says where a job is; this says how it got there: every state change, each
attempt (fence, worker, tokens, outcome, a stale result discarded), the result
(read from an e-invoice's XML or from the text, each value's evidence, the reasons:
:mod:`pipeline.jobs.explain_result`), the admission grants of its attempts and how
each was settled (reconciled, refunded, kept as uncertain), what each attempt was
charged (its usage at its model's prompt and completion prices, or its reservation
while its usage is unknown: :mod:`pipeline.spend`), its outbox events and
inbox records, its ERP deliveries with every delivery attempt and the ERP's
acknowledgement (awaited, overdue, accepted, rejected, duplicate), the review decisions
and corrections, operator re-drives and the cancellation (who, when, what became of
its deliveries), legal holds and what retention removed (and when), the erasure
of its content (who, when, what was erased, kept and why: :mod:`pipeline.jobs.erasure`);
the request's schema version, model policy and options; and the job's trace id
(:mod:`pipeline.tracing`).

Every printed line passes through :func:`pipeline.text_safety.visible`: errors,
notes and corrected values may carry text from a document, a model or a person,
and a bidi control or a newline in them must show as ``\u202e`` / ``\n``, not
reorder or forge the lines around it.

Operator view: the job is looked up by id alone (the caller checked operator
scope), and every other read is scoped to the job's own tenant. The sections of
other aggregates (admission, delivery, review) are read through their named
queries, so this package imports none of them.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from pipeline.data_keys import DataKeys
from pipeline.errors import NotFound
from pipeline.jobs.cancellation import cancellations_for_job
from pipeline.jobs.erasure import erasures_for_job
from pipeline.jobs.explain_result import result_lines, result_section
from pipeline.jobs.legal_holds import retention_for_job, retention_lines
from pipeline.jobs.redrive import redrives_for_job
from pipeline.queries import q
from pipeline.sealed_results import (
    UNREADABLE,
    open_changes,
    open_reasons,
    open_result,
    open_validation,
)
from pipeline.text_safety import visible
from pipeline.tracing import trace_id_of

#: The sections of :func:`explain`, in the order :func:`render_explain` prints them.
SECTIONS = (
    "events",
    "attempts",
    "admission",
    "spend",
    "outbox",
    "inbox",
    "deliveries",
    "reviews",
    "corrections",
    "redrives",
    "cancellations",
    "retention",
    "erasures",
)


async def _rows(conn: asyncpg.Connection, query: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(r.items()) for r in await conn.fetch(q(query), *args)]


async def _corrections(
    conn: asyncpg.Connection, job_id: uuid.UUID, tenant: uuid.UUID, keys: DataKeys | None
) -> list[dict[str, Any]]:
    """The job's corrections, a corrected value's before and after opened (sealed at rest)."""
    rows = await _rows(conn, "review_correction_list_for_job", job_id, tenant)
    if keys is not None:
        for row in rows:
            row["changes"] = await open_changes(
                keys, conn, tenant, job_id, row["changes"] or [], mark=UNREADABLE
            )
            for side in ("reasons_before", "reasons_after"):
                row[side] = await open_reasons(
                    keys, conn, tenant, job_id, row[side] or [], mark=UNREADABLE
                )
    return rows


async def explain(
    conn: asyncpg.Connection, job_id: uuid.UUID, *, keys: DataKeys | None = None
) -> dict[str, Any]:
    """The job and every section of its history (see :data:`SECTIONS`).

    ``keys`` open the result's sealed values (:mod:`pipeline.sealed_results`); a
    shredded one shows as such. Without them a sealed value shows as its token.

    Raises:
        NotFound: no such job.
    """
    job = await conn.fetchrow(q("job_get_any_tenant"), job_id)
    if job is None:
        raise NotFound(f"job {job_id}")
    tenant = job["tenant_id"]
    deliveries = await _rows(conn, "delivery_list_for_job", job_id, tenant)
    for d in deliveries:
        d["attempt_history"] = await _rows(
            conn, "delivery_attempt_list_for_tenant", d["id"], tenant
        )
        d["acknowledgements"] = await _rows(conn, "delivery_ack_list_for_tenant", d["id"], tenant)
    document = None
    if job["document_id"] is not None:
        row = await conn.fetchrow(q("document_get"), job["document_id"], tenant)
        if row is not None:
            # the texts (sealed at rest) are content, not audit: never in explain
            document = {k: v for k, v in row.items() if k not in ("content", "derived_text")}
    attempts = await _rows(conn, "attempt_list_for_job", job_id)
    admission = await _rows(conn, "admission_grant_list_by_job", tenant, job_id)
    spend = await _rows(conn, "spend_charge_list_for_job", tenant, job_id)
    stored = await conn.fetchrow(q("result_get_for_tenant"), job_id, tenant)
    opened = None if stored is None else dict(stored.items())
    if opened is not None and keys is not None:
        opened["result"] = await open_result(
            keys, conn, tenant, job_id, opened["result"], mark=UNREADABLE
        )
        opened["validation"] = await open_validation(
            keys, conn, tenant, job_id, opened["validation"], mark=UNREADABLE
        )
    options = await conn.fetchval(q("job_options_get_for_tenant"), job_id, tenant)
    return {
        "job": dict(job.items()),
        "options": options or {},
        "document": document,
        "result": result_section(opened, attempts, admission),
        "events": await _rows(conn, "job_event_list_for_job", job_id),
        "attempts": attempts,
        "admission": admission,
        "spend": spend,
        "outbox": await _rows(conn, "outbox_list_for_job", job_id),
        "inbox": await _rows(conn, "inbox_list_for_job", job_id),
        "deliveries": deliveries,
        "reviews": await _rows(conn, "review_decision_list_for_job", job_id, tenant),
        "corrections": await _corrections(conn, job_id, tenant, keys),
        "redrives": await redrives_for_job(conn, job_id),
        "cancellations": await cancellations_for_job(conn, job_id),
        "retention": await retention_for_job(conn, job_id, tenant),
        "erasures": await erasures_for_job(conn, job_id),
    }


def render_explain(data: dict[str, Any]) -> str:
    """A human-readable audit trail, one headed section per part of the history."""
    job = data["job"]
    lines = [
        f"job {job['id']}  tenant {job['tenant_id']}",
        f"  state {job['state']} (v{job['state_version']})  attempt {job['attempt']}/"
        f"{job['max_attempts']}  fence {job['fence']}",
        f"  created {job['created_at']}  deadline {job['deadline_at']}  finished "
        f"{job['finished_at']}",
        f"  trace {trace_id_of(job.get('traceparent')) or '- (accepted before tracing)'}",
    ]
    lines.append(
        f"  schema_version {job.get('schema_version')}  model_policy {job.get('model_policy')}"
        "  options "
        + (json.dumps(data["options"], sort_keys=True) if data.get("options") else "none")
    )
    if data.get("document"):
        lines.append(f"  document {_document(data['document'])}")
    if job.get("terminal_reason"):
        lines.append(f"  terminal reason: {job['terminal_reason']}")
    if job.get("last_error_class") or job.get("last_error"):
        lines.append(f"  last error: {job['last_error_class']}: {job['last_error']}")
    if "result" in data:
        lines.extend(result_lines(data["result"]))
    for name in SECTIONS:
        lines.append(f"{name}:" if data.get(name) else f"{name}: none")
        for row in data.get(name) or []:
            lines.extend(f"  {line}" for line in _LINES[name](row))
    return "\n".join(visible(line) for line in lines)


def _document(d: dict[str, Any]) -> str:
    """The accepted document: a pasted text, or a file's media type, size, pages and
    where its bytes are (the document stage's reading is on the attempt's trace)."""
    pages = f", {d['page_count']} page(s)" if d.get("page_count") else ""
    where = d.get("uri") or "pasted text"
    version = f" version {d['version']}" if d.get("version") else ""
    erased = f"; content erased {d['erased_at']}" if d.get("erased_at") else ""
    return (
        f"{d['id']}: {d['content_type']}, {d['byte_size']} bytes{pages}; {where}{version};"
        f" sha256 {d['sha256']}{erased}"
    )


def _event(e: dict[str, Any]) -> list[str]:
    detail = f"  ({e['detail']})" if e["detail"] else ""
    return [
        f"#{e['seq']} {e['created_at']}  {e['from_state'] or '-':>15} -> {e['to_state']:<15}"
        f" v{e['state_version']} fence {e['fence']} attempt {e['attempt']}{detail}"
    ]


def _attempt(a: dict[str, Any]) -> list[str]:
    late = f"; late result discarded at {a['late_result_at']}" if a["late_result_at"] else ""
    return [
        f"attempt {a['attempt']} fence {a['fence']} worker {a['worker_id']}: {a['outcome']}"
        f" {a['error_class'] or ''} engine {a['engine'] or '-'} tokens in/out/cached"
        f" {a['prompt_tokens']}/{a['completion_tokens']}/{a['cached_tokens']}"
        f" uncertain={a['uncertain']} [{a['started_at']} .. {a['ended_at']}]{late}"
    ]


def _grant(g: dict[str, Any]) -> list[str]:
    return [
        f"grant {g['id']} scope {g['scope']} fence {g['fence']} {g['priority_class']}:"
        f" reserved {g['reserved_tokens']}, charged {g['charged_tokens']}"
        f" (reported in/out {g['prompt_tokens']}/{g['completion_tokens']}) -> {g['outcome']}"
        f" by {g['settled_by'] or '-'} [{g['granted_at']} .. {g['settled_at']}]"
    ]


def _charge(c: dict[str, Any]) -> list[str]:
    prices = (
        f" at {c['prompt_price_per_1k']}/{c['completion_price_per_1k']} per 1k"
        if c["prompt_price_per_1k"] is not None
        else ""
    )
    if c["estimated"]:
        basis = "estimated: the attempt's reservation, its usage unknown"
    elif c["reconciled_at"] is not None:
        basis = f"reported; replaced the estimate {c['estimated_amount']} at {c['reconciled_at']}"
    else:
        basis = "reported"
    return [
        f"fence {c['fence']} model {c['model'] or '-'}: tokens in/out"
        f" {c['prompt_tokens']}/{c['completion_tokens']}{prices} = {c['amount']} ({basis})"
    ]


def _outbox(o: dict[str, Any]) -> list[str]:
    return [
        f"{o['event_type']:<32} event {o['event_id']} created {o['created_at']}"
        f" published {o['published_at']}"
    ]


def _inbox(i: dict[str, Any]) -> list[str]:
    return [f"event {i['event_id']} received {i['received_at']}"]


def _delivery(d: dict[str, Any]) -> list[str]:
    out = [
        f"delivery {d['id']} to endpoint {d['endpoint_id']} {d['event_type']}: {d['state']}"
        f" after {d['attempts']} attempt(s), last HTTP {d['last_status']}"
        + (f", {d['final_reason']}" if d["final_reason"] else "")
    ]
    for a in d.get("attempt_history", []):
        out.append(
            f"  attempt {a['attempt']} fence {a['fence']} worker {a['worker_id']}: {a['outcome']}"
            f" HTTP {a['http_status']} {a['error_class'] or ''} {a['latency_ms']} ms"
            f" to {a['address']} [{a['started_at']} .. {a['ended_at']}]"
        )
    return out + _acknowledgement(d)


def _acknowledgement(d: dict[str, Any]) -> list[str]:
    """The ERP's acknowledgement of a delivery (when its endpoint asks for one)."""
    state = d.get("ack_state")
    if state is None:
        return []
    out = [f"  acknowledgement: {state}, due {d['ack_due_at'] or 'once delivered'}"]
    if d.get("ack_overdue_at") is not None:
        out[0] += f", overdue (alerted) {d['ack_overdue_at']}"
    if d.get("acknowledged_at") is not None:
        out[0] += f", acknowledged {d['acknowledged_at']}"
        if d.get("ack_reason"):
            out[0] += f": {d['ack_reason']}"
    for m in d.get("acknowledgements", []):
        out.append(
            f"    message {m['message_id']} {m['outcome']} ({m['effect']})"
            f" key {m['key_id']} received {m['received_at']}"
        )
    return out


def _reviewer(r: dict[str, Any]) -> str:
    """The key behind a review: its label, else its prefix (or id)."""
    return r.get("key_label") or f"key {r.get('key_prefix') or r['api_key_id']}"


def _review(r: dict[str, Any]) -> list[str]:
    return [
        f"{r['created_at']} {r['decision']} by {_reviewer(r)}:"
        f" {r['note']}  (v{r['from_state_version']} -> {r['to_state']} v{r['to_state_version']})"
    ]


def _correction(c: dict[str, Any]) -> list[str]:
    out = [
        f"{c['created_at']} by key {c['api_key_id']}:"
        f" v{c['from_state_version']} -> {c['to_state']} v{c['to_state_version']}"
    ]
    for change in c["changes"]:
        if "before" not in change and "after" not in change:  # erased or past retention
            out.append(f"  {change['field']}: (values removed)")
            continue
        out.append(
            f"  {change['field']}: {change.get('before')!r} -> {change.get('after')!r}"
            + ("" if change.get("grounded", True) else "  (not printed in the document)")
        )
    codes = ", ".join(f"{r['code']}@{r['field']}" for r in c["reasons_after"]) or "none"
    out.append(f"  reasons after: {codes}")
    for o in c["overrides"]:
        out.append(f"  overridden: {o['code']}@{o['field']}  note {c['note']!r}")
    return out


def _redrive(r: dict[str, Any]) -> list[str]:
    return [
        f"{r['created_at']} by {r['requested_by']}: {r['reason']}  (attempts before"
        f" {r['attempts_before']}/{r['max_attempts_before']}, now up to"
        f" {r['max_attempts_after']}; failed with {r['terminal_reason']}"
        f" {r['error_class'] or ''}; v{r['from_state_version']} -> v{r['to_state_version']})"
    ]


def _cancellation(c: dict[str, Any]) -> list[str]:
    out = [
        f"{c['created_at']} by {c['requested_by']}: {c['reason'] or '(no reason given)'}"
        f"  (from {c['from_state']} v{c['from_state_version']} -> CANCELLED"
        f" v{c['to_state_version']}; fence {c['fence_before']} -> {c['fence_after']})"
    ]
    stopped = ", ".join(map(str, c["deliveries_cancelled"]))
    sent = ", ".join(map(str, c["deliveries_sent"]))
    if stopped:
        out.append(f"  deliveries not sent, cancelled: {stopped}")
    if sent:
        out.append(f"  deliveries already sent (not recalled): {sent}")
    return out


def _erasure(e: dict[str, Any]) -> list[str]:
    first = " (cancelled first)" if e["cancelled_first"] else ""
    out = [
        f"{e['created_at']} content erased by {e['requested_by']}:"
        f" {e['reason'] or '(no reason given)'}  (job {e['job_state']}{first})",
        f"  document sha256 {e['document_sha256'] or '-'}: "
        + ("erased" if e["document_erased"] else "kept (another job refers to it)"),
        f"  result sha256 {e['result_sha256'] or '- (no result)'}",
    ]
    if e["object_uri"]:
        when = f" {e['object_removed_at']}" if e["object_removed_at"] else ""
        out.append(f"  stored object {e['object_uri']}: {e['object_outcome']}{when}")
    rows = ", ".join(f"{table} {n}" for table, n in sorted(e["rows"].items()) if n)
    out.append(f"  rows erased: {rows or 'none'}")
    if e["deliveries_abandoned"]:
        out.append(
            "  deliveries not sent, abandoned: " + ", ".join(map(str, e["deliveries_abandoned"]))
        )
    if e["deliveries_sent"]:
        out.append(
            "  deliveries already sent (the receiver's copy is not recalled): "
            + ", ".join(map(str, e["deliveries_sent"]))
        )
    return out


_LINES = {
    "events": _event,
    "attempts": _attempt,
    "admission": _grant,
    "spend": _charge,
    "outbox": _outbox,
    "inbox": _inbox,
    "deliveries": _delivery,
    "reviews": _review,
    "corrections": _correction,
    "redrives": _redrive,
    "cancellations": _cancellation,
    "retention": retention_lines,
    "erasures": _erasure,
}
