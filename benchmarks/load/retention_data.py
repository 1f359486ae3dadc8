"""The retention benchmark's data set: settled jobs generated in bulk, and the check
that a pass removed exactly what the policy says.

:func:`generate_settled` writes jobs ``1..n`` of one tenant in chunks, each chunk a
few ``INSERT ... SELECT FROM generate_series`` statements, with every row the schema
and a real job would have: the pasted document, the job (its insert trigger writes
the final state's ``job_events`` row), the READY and RUNNING events before it, one
attempt, the execution-inbox record, and the result of a SUCCEEDED or REVIEW_REQUIRED
job. Outbox rows, deliveries and uploaded files (``document_texts``) are not
generated. Job ``g`` is laid out by ``g % 100`` (its age) and ``g / 100 % 20`` (its
state), so the shares below hold at any size that is a multiple of 2,000:

* ages: ``g % 100`` < 40 finished 1-27 days ago (no horizon passed), 40-84 finished
  31-339 days ago (content due), 85-99 finished 370-384 days ago (content and audit
  due); no job lies within three days of a default horizon, so minutes between
  generating and the pass change nothing;
* states: 1 in 20 FAILED_TERMINAL (no result), 1 in 20 REVIEW_REQUIRED (never due),
  the rest SUCCEEDED;
* shared text: a job with ``g % 100 == 41`` (content due) has no document of its own
  and shares job ``g - 2``'s (finished 26 days ago), so that text must stay;
* job legal holds (:data:`HOLD_SQL`): jobs with ``g % 500`` 250 or 290 (due).

:func:`expected_removal` counts what the policy makes due from the rows themselves
(one predicate over jobs, holds and policies, not the pass's SQL) and
:func:`verify_removal` compares every job, result, document and history row with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import asyncpg

#: How many jobs one generation chunk writes (one transaction per statement).
CHUNK = 100_000
#: The job states a generated job can have, by ``g / 100 % 20``.
STATE = """(CASE WHEN (g / 100) % 20 = 0 THEN 'FAILED_TERMINAL'
                WHEN (g / 100) % 20 = 1 THEN 'REVIEW_REQUIRED' ELSE 'SUCCEEDED' END)"""
#: How long before ``$now`` job ``g`` finished (see the module's docstring).
AGE = """(CASE WHEN g % 100 < 40 THEN interval '1 day' + (g % 100) * interval '16 hours'
              WHEN g % 100 < 85 THEN interval '31 days' + (g % 100 - 40) * interval '7 days'
              ELSE interval '370 days' + (g % 100 - 85) * interval '1 day' END
          + g * interval '1 millisecond')"""
#: When job ``g`` finished ($4: the generation's now).
FINISHED = f"($4::timestamptz - {AGE})"
#: ``$prefix`` namespaces the ids, so two tenants' jobs never collide.
DOC = "md5($1::text || 'd' || g)::uuid"
JOB = "md5($1::text || 'j' || g)::uuid"
SERIES = "generate_series($2::int, $3::int) g"

# Each statement: $1 prefix, $2 first g, $3 last g, $4 now, $5 tenant (those that
# need no tenant take the first four).
GENERATE = (
    f"""INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size,
           created_at)
    SELECT {DOC}, $5::uuid, encode(sha256(($1::text || 'doc' || g)::bytea), 'hex'), 'v1',
           'INVOICE ' || g || ' IBAN DE89370400440532013000 ' || repeat('line item ', 60), 640,
           {FINISHED} - interval '2 minutes'
    FROM {SERIES} WHERE g % 100 <> 41""",
    f"""INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash, document_id,
           object_version, state, state_version, attempt, fence, available_at, deadline_at,
           finished_at, result_ref, terminal_reason, created_at, updated_at)
    SELECT {JOB}, $5::uuid, 'settled-' || g, md5('h' || g),
           md5($1::text || 'd' || (CASE WHEN g % 100 = 41 THEN g - 2 ELSE g END))::uuid, 'v1',
           {STATE}, 3, 1, 1, {FINISHED} - interval '2 minutes', {FINISHED} + interval '1 day',
           {FINISHED},
           CASE WHEN {STATE} <> 'FAILED_TERMINAL' THEN 'extraction_results/' || {JOB} END,
           CASE WHEN {STATE} = 'FAILED_TERMINAL' THEN 'attempts_exhausted' END,
           {FINISHED} - interval '2 minutes', {FINISHED}
    FROM {SERIES}""",
    f"""INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version, fence,
           attempt, created_at)
    SELECT {JOB}, $5::uuid, s.from_state, s.to_state, s.version, s.version - 1, s.version - 1,
           {FINISHED} - interval '2 minutes' + s.version * interval '10 seconds'
    FROM {SERIES}
    CROSS JOIN (VALUES (NULL, 'READY', 1), ('READY', 'RUNNING', 2)) s(from_state, to_state,
                                                                      version)""",
    f"""INSERT INTO job_attempts (job_id, fence, attempt, worker_id, started_at, ended_at,
           outcome, engine, prompt_tokens, completion_tokens, cached_tokens)
    SELECT {JOB}, 1, 1, 'bulk-generator', {FINISHED} - interval '20 seconds', {FINISHED},
           lower({STATE}), 'fake', 900, 180, 0
    FROM {SERIES}""",
    f"""INSERT INTO execution_inbox (event_id, job_id, payload_digest, received_at)
    SELECT md5($1::text || 'i' || g)::uuid, {JOB}, md5('p' || g), {FINISHED} - interval '1 minute'
    FROM {SERIES}""",
    f"""INSERT INTO extraction_results (job_id, fence, result, validation, decision, created_at)
    SELECT {JOB}, 1,
           jsonb_build_object('invoice_number', 'INV-' || g, 'iban', 'DE89370400440532013000',
                              'notes', repeat('extracted value ', 30)),
           jsonb_build_object('reasons', jsonb_build_array()), {STATE}, {FINISHED}
    FROM {SERIES} WHERE {STATE} <> 'FAILED_TERMINAL'""",
)

#: Job legal holds on due jobs (set at $4), with their audit rows; numbered as above.
HOLD_SQL = (
    f"""INSERT INTO job_legal_holds (job_id, tenant_id, reason, held_by, created_at)
    SELECT {JOB}, $5::uuid, 'benchmark hold', 'retention-bench', $4::timestamptz
    FROM {SERIES} WHERE g % 500 IN (250, 290)""",
    f"""INSERT INTO legal_hold_events (tenant_id, job_id, action, reason, actor, created_at)
    SELECT $5::uuid, {JOB}, 'set', 'benchmark hold', 'retention-bench', $4::timestamptz
    FROM {SERIES} WHERE g % 500 IN (250, 290)""",
)

READY_DOC = """INSERT INTO documents (id, tenant_id, sha256, object_version, content, byte_size)
VALUES ($2, $1, encode(sha256('ready'::bytea), 'hex'), 'v1', 'INVOICE ready', 13)"""
READY_JOBS = """INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash,
       document_id, object_version, state, deadline_at)
SELECT gen_random_uuid(), $1, 'ready-' || g, 'h', $3, 'v1', 'READY', now() + interval '7 days'
FROM generate_series(1, $2::int) g"""

#: Per job of the generated tenants: due for content / audit under its policy and
#: holds, at $1 (the pass's now). One predicate, written apart from the pass's SQL.
DUE = """
WITH policy AS (
  SELECT t.id AS tenant_id,
         $1::timestamptz - make_interval(days => coalesce(p.content_days, $2::int))
           AS content_cutoff,
         $1::timestamptz - make_interval(days => coalesce(p.audit_days, $3::int))
           AS audit_cutoff,
         coalesce(p.legal_hold, false) AS held
  FROM tenants t LEFT JOIN tenant_retention p ON p.tenant_id = t.id
)
SELECT j.id, j.document_id,
       (ok AND j.finished_at < policy.content_cutoff) AS content_due,
       (ok AND j.finished_at < policy.audit_cutoff) AS audit_due
FROM extraction_jobs j
JOIN policy ON policy.tenant_id = j.tenant_id
CROSS JOIN LATERAL (
  SELECT j.state IN ('SUCCEEDED', 'FAILED_TERMINAL', 'CANCELLED') AND NOT policy.held
         AND NOT EXISTS (SELECT 1 FROM job_legal_holds h WHERE h.job_id = j.id) AS ok) o
WHERE j.tenant_id = ANY($4::uuid[])"""

EXPECTED = f"""
WITH due AS ({DUE}),
doc AS (SELECT document_id, bool_and(content_due) AS all_due FROM due GROUP BY document_id)
SELECT (SELECT count(*) FROM due WHERE content_due) AS content_jobs,
       (SELECT count(*) FROM due WHERE audit_due) AS audit_jobs,
       (SELECT count(*) FROM extraction_results r JOIN due ON due.id = r.job_id
        WHERE due.content_due) AS results,
       (SELECT count(*) FROM documents d JOIN doc ON doc.document_id = d.id
        WHERE doc.all_due AND d.content IS NOT NULL) AS documents,
       (SELECT count(*) FROM job_events e JOIN due ON due.id = e.job_id
        WHERE due.audit_due) AS job_events,
       (SELECT count(*) FROM execution_inbox i JOIN due ON due.id = i.job_id
        WHERE due.audit_due) AS inbox_records,
       (SELECT count(*) FROM job_legal_holds h JOIN due ON due.id = h.job_id) AS held_jobs"""

#: Every way a pass can differ from the policy, each a count that must be 0.
MISMATCHES = f"""
WITH due AS ({DUE}),
doc AS (SELECT document_id, bool_and(content_due) AS all_due FROM due GROUP BY document_id),
events AS (SELECT job_id, count(*) AS n FROM job_events GROUP BY job_id),
inbox AS (SELECT job_id, count(*) AS n FROM execution_inbox GROUP BY job_id)
SELECT
  (SELECT count(*) FROM due LEFT JOIN job_retention_marks m ON m.job_id = due.id
   WHERE due.content_due <> (m.job_id IS NOT NULL)) AS marks,
  (SELECT count(*) FROM due JOIN job_retention_marks m ON m.job_id = due.id
   WHERE due.audit_due <> (m.audit_removed_at IS NOT NULL)) AS audit_marks,
  (SELECT count(*) FROM due JOIN extraction_results r ON r.job_id = due.id
   WHERE due.content_due <> (r.result = '{{}}'::jsonb AND r.validation = '{{}}'::jsonb))
    AS results,
  (SELECT count(*) FROM documents d JOIN doc ON doc.document_id = d.id
   WHERE (d.content IS NULL) <> doc.all_due) AS documents,
  (SELECT count(*) FROM due LEFT JOIN events e ON e.job_id = due.id
   WHERE due.audit_due = (coalesce(e.n, 0) > 0)) AS job_events,
  (SELECT count(*) FROM due LEFT JOIN inbox i ON i.job_id = due.id
   WHERE due.audit_due = (coalesce(i.n, 0) > 0)) AS inbox_records,
  (SELECT count(*) FROM job_legal_holds h JOIN job_retention_marks m ON m.job_id = h.job_id)
    AS held_jobs_touched"""

#: Rows of the generated tenants ($1) in the tables the pass writes (an emptied
#: result or document counts as gone), and in those it must leave alone.
TABLE_COUNTS = """
SELECT (SELECT count(*) FROM extraction_results r JOIN extraction_jobs j ON j.id = r.job_id
        WHERE j.tenant_id = ANY($1::uuid[]) AND r.result <> '{}'::jsonb) AS results,
       (SELECT count(*) FROM documents
        WHERE tenant_id = ANY($1::uuid[]) AND content IS NOT NULL) AS documents,
       (SELECT count(*) FROM job_events WHERE tenant_id = ANY($1::uuid[])) AS job_events,
       (SELECT count(*) FROM execution_inbox i JOIN extraction_jobs j ON j.id = i.job_id
        WHERE j.tenant_id = ANY($1::uuid[])) AS inbox_records,
       (SELECT count(*) FROM job_attempts a JOIN extraction_jobs j ON j.id = a.job_id
        WHERE j.tenant_id = ANY($1::uuid[])) AS attempts,
       (SELECT count(*) FROM extraction_jobs WHERE tenant_id = ANY($1::uuid[])) AS jobs"""


@dataclass(frozen=True)
class Expected:
    """What the policy makes due now, counted from the rows before the pass."""

    content_jobs: int
    audit_jobs: int
    results: int
    documents: int
    job_events: int
    inbox_records: int
    held_jobs: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


async def generate_settled(
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    n: int,
    *,
    now: datetime,
    prefix: str,
    progress: Callable[[str], None] | None = None,
) -> float:
    """Write jobs ``1..n`` of ``tenant`` (see the module docstring) and their job
    holds; returns the seconds it took."""
    started = time.perf_counter()
    for first in range(1, n + 1, CHUNK):
        last = min(n, first + CHUNK - 1)
        args = (prefix, first, last, now, tenant)
        for sql in (*GENERATE, *HOLD_SQL):
            await conn.execute(sql, *args[: 5 if "$5" in sql else 4])
        if progress is not None:
            progress(f"generated {last:,} / {n:,} jobs ({time.perf_counter() - started:.0f} s)")
    return time.perf_counter() - started


async def add_ready(conn: asyncpg.Connection, tenant: uuid.UUID, n: int) -> None:
    """``n`` READY jobs of ``tenant`` sharing one small document, for the claimers."""
    doc = uuid.uuid4()
    await conn.execute(READY_DOC, tenant, doc)
    await conn.execute(READY_JOBS, tenant, n, doc)


async def expected_removal(
    conn: asyncpg.Connection,
    now: datetime,
    tenants: list[uuid.UUID],
    *,
    content_days: int,
    audit_days: int,
) -> Expected:
    row = await conn.fetchrow(EXPECTED, now, content_days, audit_days, tenants)
    return Expected(**dict(row))


async def table_counts(conn: asyncpg.Connection, tenants: list[uuid.UUID]) -> dict[str, int]:
    return dict(await conn.fetchrow(TABLE_COUNTS, tenants))


async def verify_removal(
    conn: asyncpg.Connection,
    now: datetime,
    tenants: list[uuid.UUID],
    *,
    content_days: int,
    audit_days: int,
) -> dict[str, int]:
    """Per kind of row, how many differ from what the policy says (all 0 when right)."""
    row = await conn.fetchrow(MISMATCHES, now, content_days, audit_days, tenants)
    return dict(row)


def removed_per_table(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Rows gone (deleted, or emptied for results and documents) per table."""
    return {k: before[k] - after[k] for k in before}
