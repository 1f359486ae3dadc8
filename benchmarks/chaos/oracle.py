"""The end-to-end oracle: the final state checked against what clients saw.

Jepsen's total-queue checker is the model: record every operation a client
observed (:class:`ClientLog`: each 202 and its job id), then read the final
state (the product's tables and the reference ERP receiver's) and check it.
Each invariant yields one :class:`Verdict` naming the offending job ids:

* ``accepted_exist``: every job a client got a 202 for exists;
* ``terminal_or_live``: every job is settled, or RUNNING under a live lease, or
  waits for a future ``available_at`` (a due job nobody claims is stuck);
* ``erp_once``: the ERP applied the posting step exactly once for every
  SUCCEEDED job and never for any other (after review too);
* ``no_stale_writes``: no result or success transition carries a fence other
  than the owner's; late results were recorded as discarded and changed nothing;
* ``attempts_monotonic``: attempt numbers and fences never go back in a job's history;
* ``outbox_complete``: every job has its execution request in the outbox,
  published or still pending (pending ones are listed, not failed);
* ``admission_within_budget``: RPM, TPM and in-flight permits of the scope
  were never exceeded at any grant (from the admission ledger);
* ``inbox_at_most_once``: every inbox record is one outbox event of its job,
  recorded once.

``lost`` (the headline figure) is the number of accepted jobs that either do
not exist or are neither settled nor live. The module needs only asyncpg and
the named queries of ``sql/queries/oracle.sql`` (no Ray), so fault tests use it
as well as the chaos scenario.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.queries import q

SETTLED = frozenset({"SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL", "CANCELLED"})
#: Seconds a ledger timestamp may lag the admission actor's in-memory decision.
LEDGER_TOLERANCE_S = 0.5
#: Offending ids shown per verdict in the rendered text (all are in ``offenders``).
SHOWN = 8


@dataclass
class ClientLog:
    """What clients observed: every accepted job id (with its 202 time, epoch seconds)."""

    accepted: dict[str, float] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)

    def accept(self, job_id: str, at: float) -> None:
        self.accepted[job_id] = at

    def reject(self, status: int) -> None:
        self.rejected[str(status)] = self.rejected.get(str(status), 0) + 1


@dataclass(frozen=True)
class AdmissionBudget:
    """The limits the admission actor enforced for ``scope`` (None: not enforced)."""

    scope: str
    rpm: int | None = None
    tpm: int | None = None
    max_in_flight: int | None = None
    window_seconds: float = 60.0


@dataclass(frozen=True)
class Verdict:
    """One invariant's outcome: ``offenders`` are job ids (or grant ids), ``detail`` why."""

    name: str
    offenders: tuple[str, ...] = ()
    detail: tuple[str, ...] = ()
    #: What was checked, for the summary (e.g. "200 jobs").
    checked: str = ""
    #: Not violations, but worth reading (pending outbox events, explained waits).
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.offenders

    def line(self) -> str:
        head = f"{'PASS' if self.ok else 'FAIL'}  {self.name:<24} {self.checked}"
        if self.ok:
            return head + (f"  ({'; '.join(self.notes[:2])})" if self.notes else "")
        shown = ", ".join(self.detail[:SHOWN] or self.offenders[:SHOWN])
        more = f" (+{len(self.offenders) - SHOWN} more)" if len(self.offenders) > SHOWN else ""
        return f"{head}  {len(self.offenders)} offending: {shown}{more}"


@dataclass(frozen=True)
class Failure:
    """Why one job ended FAILED_TERMINAL: its reason and one line per attempt."""

    job_id: str
    terminal_reason: str
    attempts: tuple[str, ...]


def _attempt_line(r: Any) -> str:
    if r["fence"] is None:  # failed before any attempt (e.g. its deadline passed waiting)
        return f"no attempt: {r['last_error']}"
    seconds = r["attempt_seconds"]
    took = "still open" if seconds is None else f"{seconds:.1f} s"
    error = f": {r['error_class']}: {r['error_detail']}" if r["error_class"] else ""
    return f"fence {r['fence']} {r['outcome']} after {took}{error}"


async def failures(conn: asyncpg.Connection) -> tuple[Failure, ...]:
    """Every FAILED_TERMINAL job of ``conn``'s database, with its attempts."""
    reasons: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    for r in await conn.fetch(q("oracle_failure_list")):
        job = str(r["job_id"])
        reasons[job] = str(r["terminal_reason"])
        lines.setdefault(job, []).append(_attempt_line(r))
    return tuple(Failure(job, reasons[job], tuple(lines[job])) for job in reasons)


@dataclass(frozen=True)
class OracleReport:
    verdicts: tuple[Verdict, ...]
    #: Accepted jobs missing, or neither settled nor live.
    lost: tuple[str, ...]
    states: dict[str, int]
    jobs: int
    #: Each FAILED_TERMINAL job's reason and attempts (not an invariant: an explanation).
    failures: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    def verdict(self, name: str) -> Verdict:
        for v in self.verdicts:
            if v.name == name:
                return v
        raise KeyError(f"no invariant {name!r}")

    def render(self) -> str:
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.states.items()))
        lines = [f"oracle: {self.jobs} jobs ({states}); lost {len(self.lost)}"]
        lines += [f"  {v.line()}" for v in self.verdicts]
        lines.append(f"  verdict: {'ALL INVARIANTS HOLD' if self.ok else 'VIOLATIONS'}")
        for f in self.failures:
            lines.append(f"  failed {f.job_id}: {f.terminal_reason}")
            lines += [f"    {a}" for a in f.attempts]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "jobs": self.jobs,
            "lost": len(self.lost),
            "lost_ids": list(self.lost),
            "states": dict(self.states),
            "failures": [
                {
                    "job_id": f.job_id,
                    "terminal_reason": f.terminal_reason,
                    "attempts": list(f.attempts),
                }
                for f in self.failures
            ],
            "invariants": {
                v.name: {
                    "ok": v.ok,
                    "checked": v.checked,
                    "violations": len(v.offenders),
                    "offenders": list(v.offenders),
                    "detail": list(v.detail),
                    "notes": list(v.notes),
                }
                for v in self.verdicts
            },
        }


def _unique(ids: Iterable[Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(i) for i in ids))


async def check(
    conn: asyncpg.Connection,
    clients: ClientLog,
    *,
    admission: AdmissionBudget | None = None,
    now: datetime | None = None,
) -> OracleReport:
    """Check every invariant on ``conn``'s database against ``clients``' observations.

    Args:
        conn: a connection to the run's database (it also holds the ERP receiver's tables).
        clients: every 202 the clients saw.
        admission: the scope and limits to check the ledger against; None skips that check.
        now: the instant liveness is judged at (None: the server's clock).
    """
    jobs = {str(r["id"]): r for r in await conn.fetch(q("oracle_job_list"), now)}
    states: dict[str, int] = {}
    for r in jobs.values():
        states[r["state"]] = states.get(r["state"], 0) + 1
    verdicts = [
        _accepted_exist(clients, jobs),
        _terminal_or_live(jobs),
        await _erp_once(conn),
        await _no_stale_writes(conn, jobs),
        await _attempts_monotonic(conn, jobs),
        await _outbox_complete(conn, now),
        await _admission_within_budget(conn, admission),
        await _inbox_at_most_once(conn),
    ]
    lost = _unique([*verdicts[0].offenders, *verdicts[1].offenders])
    return OracleReport(tuple(verdicts), lost, states, len(jobs), await failures(conn))


def _accepted_exist(clients: ClientLog, jobs: dict[str, Any]) -> Verdict:
    missing = [j for j in clients.accepted if j not in jobs]
    extra = len(set(jobs) - set(clients.accepted))
    notes = (f"{extra} jobs no client saw accepted",) if extra else ()
    return Verdict(
        "accepted_exist", _unique(missing), checked=f"{len(clients.accepted)} 202s", notes=notes
    )


def _terminal_or_live(jobs: dict[str, Any]) -> Verdict:
    stuck, detail, notes = [], [], []
    for job_id, r in jobs.items():
        state = r["state"]
        if state in SETTLED:
            continue
        if state == "RUNNING" and r["lease_live"]:
            notes.append(f"{job_id} RUNNING by {r['lease_owner']}")
            continue
        if state in ("READY", "RETRY_SCHEDULED") and r["waits_for_later"]:
            notes.append(f"{job_id} {state} in {r['available_in_seconds']:.0f}s")
            continue
        stuck.append(job_id)
        detail.append(f"{job_id} {state} (fence {r['fence']}, last error {r['last_error_class']})")
    return Verdict(
        "terminal_or_live",
        _unique(stuck),
        tuple(detail),
        checked=f"{len(jobs)} jobs",
        notes=tuple(notes),
    )


async def _erp_once(conn: asyncpg.Connection) -> Verdict:
    rows = await conn.fetch(q("oracle_erp_application_list"))
    bad, detail = [], []
    for r in rows:
        want = 1 if r["state"] == "SUCCEEDED" else 0
        if r["applications"] != want:
            bad.append(r["job_id"])
            detail.append(
                f"{r['job_id']} {r['state'] or 'no such job'}: {r['applications']} applications"
                f" (deliveries {r['deliveries'] or 'none'})"
            )
    succeeded = sum(1 for r in rows if r["state"] == "SUCCEEDED")
    absorbed = sum(1 for r in rows if r["deliveries_seen"] > 1)
    notes = (f"{absorbed} jobs arrived under more than one delivery",) if absorbed else ()
    return Verdict(
        "erp_once", _unique(bad), tuple(detail), f"{succeeded} SUCCEEDED jobs", notes=notes
    )


async def _no_stale_writes(conn: asyncpg.Connection, jobs: dict[str, Any]) -> Verdict:
    rows = await conn.fetch(q("oracle_stale_write_list"))
    late = sum(r["late_results"] for r in jobs.values())
    return Verdict(
        "no_stale_writes",
        _unique(r["job_id"] for r in rows),
        tuple(f"{r['job_id']} {r['reason']}" for r in rows),
        checked=f"{late} late results discarded",
    )


async def _attempts_monotonic(conn: asyncpg.Connection, jobs: dict[str, Any]) -> Verdict:
    rows = await conn.fetch(q("oracle_regression_list"))
    attempts = sum(r["attempts"] for r in jobs.values())
    return Verdict(
        "attempts_monotonic",
        _unique(r["job_id"] for r in rows),
        tuple(f"{r['job_id']} {r['reason']}" for r in rows),
        checked=f"{attempts} attempts",
    )


async def _outbox_complete(conn: asyncpg.Connection, now: datetime | None) -> Verdict:
    rows = await conn.fetch(q("oracle_outbox_list"), now)
    missing = [r["job_id"] for r in rows if r["requested_events"] == 0]
    pending = await conn.fetch(q("oracle_outbox_pending_list"), now)
    notes = tuple(
        f"{r['event_type']} of {r['job_id']} pending {r['age_seconds']:.0f}s "
        f"after {r['publish_attempts']} publishes ({r['last_error'] or 'no error'})"
        for r in pending
    )
    return Verdict(
        "outbox_complete",
        _unique(missing),
        tuple(f"{j} has no execution request event" for j in missing),
        checked=f"{len(rows)} requests, {len(pending)} events pending",
        notes=notes,
    )


async def _admission_within_budget(
    conn: asyncpg.Connection, budget: AdmissionBudget | None
) -> Verdict:
    if budget is None:
        return Verdict("admission_within_budget", checked="not checked (no scope given)")
    rows = await conn.fetch(
        q("oracle_admission_window_list"),
        budget.scope,
        budget.window_seconds,
        LEDGER_TOLERANCE_S,
    )
    bad, detail = [], []
    peak = {"requests": 0, "tokens": 0, "in_flight": 0}
    for r in rows:
        for key, limit in (
            ("requests", budget.rpm),
            ("tokens", budget.tpm),
            ("in_flight", budget.max_in_flight),
        ):
            peak[key] = max(peak[key], int(r[key]))
            if limit is not None and r[key] > limit:
                bad.append(r["job_id"] or r["id"])
                detail.append(f"grant {r['id']} (job {r['job_id']}): {key} {r[key]} > {limit}")
    peaks = f"peaks: {peak['requests']} req, {peak['tokens']} tok, {peak['in_flight']} in flight"
    return Verdict(
        "admission_within_budget",
        _unique(bad),
        tuple(detail),
        checked=f"{len(rows)} grants; {peaks}",
    )


async def _inbox_at_most_once(conn: asyncpg.Connection) -> Verdict:
    rows = await conn.fetch(q("oracle_inbox_violation_list"))
    records = await conn.fetchval(q("oracle_inbox_count"))
    return Verdict(
        "inbox_at_most_once",
        _unique(r["job_id"] for r in rows),
        tuple(f"{r['job_id']} event {r['event_id']}: {r['reason']}" for r in rows),
        checked=f"{records} inbox records",
    )
