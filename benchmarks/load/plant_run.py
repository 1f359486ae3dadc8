"""The planted documents in a running load run: credit notes sent, the oracle read back.

:mod:`benchmarks.load.plants` decides what is planted and scores it; this module does
the two parts that need the running system: :func:`send_credit_notes` uploads each
planted credit note once its origin's job SUCCEEDED (a credit note of an invoice the
tenant does not have yet is a review case of its own, not this rule's), and
:func:`score_run` reads the settled jobs, ``credit_note_links`` and the reference
ERP's postings to score every plant.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import httpx

from benchmarks.load.collect import RunRecord, RunState
from benchmarks.load.plants import Plant, score
from pipeline.jobs import EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED
from pipeline.queries import q

#: The bench ERP's endpoints receive invoices and credit notes.
ERP_EVENTS = (EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED)
_SETTLED_OTHERWISE = {"REVIEW_REQUIRED", "FAILED_TERMINAL", "DEAD_LETTERED", "CANCELLED"}


async def send_credit_notes(
    url: str,
    pool: asyncpg.Pool,
    plants: Sequence[Plant],
    job_of: dict[int, str],
    tenant_of: Sequence[int],
    tenants: Sequence[tuple[str, str, uuid.UUID]],
    state: RunState,
    credit_jobs: dict[int, str],
    arrivals_over: asyncio.Event,
) -> None:
    """Upload each planted credit note as XML once its origin's job SUCCEEDED.

    An accepted one joins ``state.accepted`` (a job of the run like any other) and
    ``credit_jobs``; one whose origin settled otherwise, or was never accepted once the
    arrivals are over, is not sent (the oracle counts it as not decided by its rule).
    """
    pending = [p for p in plants if p.kind == "credit_note"]
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while pending:
            origins = [job_of[p.origin] for p in pending if p.origin in job_of]
            async with pool.acquire() as conn:
                rows = await conn.fetch(q("bench_job_states_of"), [uuid.UUID(j) for j in origins])
            states = {str(r["id"]): r["state"] for r in rows}
            for p in list(pending):
                job = job_of.get(p.origin)
                st = states.get(job) if job is not None else None
                if st == "SUCCEEDED":
                    pending.remove(p)
                    name, bearer, _ = tenants[tenant_of[p.origin]]
                    r = await client.post(
                        "/v1/extraction-jobs",
                        files={"document": (f"credit-{p.origin}.xml", p.xml, "application/xml")},
                        headers={
                            "Authorization": f"Bearer {bearer}",
                            "Idempotency-Key": f"bench-credit-{p.origin}",
                        },
                    )
                    if r.status_code == 202:
                        job_id = r.json()["job_id"]
                        credit_jobs[p.origin] = job_id
                        state.accepted[job_id] = (name, time.time())
                elif st in _SETTLED_OTHERWISE or (job is None and arrivals_over.is_set()):
                    pending.remove(p)
            await asyncio.sleep(0.5)


async def score_run(
    pool: asyncpg.Pool, plants: Sequence[Plant], record: RunRecord
) -> dict[str, Any]:
    """The oracle's verdict on the run's plants, and the ERP's double postings."""
    async with pool.acquire() as conn:
        jobs = {
            str(r["id"]): (r["state"], r["validation"])
            for r in await conn.fetch(q("bench_job_validations"))
        }
        links = {
            str(r["job_id"]): str(r["invoice_job_id"])
            for r in await conn.fetch(q("bench_credit_note_links"))
        }
        postings = await conn.fetch(q("bench_erp_posting_rows"))
    credits_posted = {
        str(r["job_id"]): (str(r["credits_job_id"]) if r["credits_job_id"] else None)
        for r in postings
        if r["kind"] == "credit_note"
    }
    verdict = score(plants, record.job_of, record.credit_jobs, jobs, links, credits_posted)
    held = {
        record.job_of[p.index] for p in plants if p.index is not None and p.index in record.job_of
    }
    return {
        **verdict.as_dict(),
        "linked_credit_notes": len(links),
        "erp_postings": len(postings),
        "erp_credit_postings": len(credits_posted),
        "erp_applied_twice": sum(1 for r in postings if r["effect_count"] > 1),
        "erp_planted_held_posted": sum(1 for r in postings if str(r["job_id"]) in held),
    }
