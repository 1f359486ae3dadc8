"""Settling many finished attempts in one transaction, each under its own fence.

The store's :meth:`~pipeline.jobs.store.JobStore.succeed` commits one result
per transaction: four statements and a commit (a WAL flush) per job. When
several attempts finish together, :meth:`BatchSettling.succeed_many` writes
them all with one statement over arrays (``unnest``: job rows, results, attempt
closes and outbox events) and one commit. Without settle hooks and without an
invoice to claim, that statement is the whole transaction (one round trip);
otherwise BEGIN, the invoice claims, the statement, the hooks (a
:class:`~pipeline.jobs.records.BatchSettleHook` once per batch) and COMMIT. With a
KEK configured, sealing each result's text (:mod:`pipeline.sealed_results`) reads
the tenant's data key first: one primary-key read per result (two where its
validation report holds reasons).

Invariants (the same as one at a time):

* **Each attempt is conditional on its own fence.** The job row moves only
  while ``RUNNING`` under that attempt's fence with an unexpired lease; a stale
  attempt matches no row, writes nothing, and comes back in
  :attr:`BatchSettled.lost` while the others commit.
* **Everything of a settled attempt commits together**: job row, result row,
  attempt close, outbox event, settle hooks. Any of them failing (an attempt
  row that is not running fails the statement itself, SQLSTATE ``FL001``; a
  hook raising) rolls the *whole batch* back and raises: nothing of it
  committed, and the caller settles the attempts one by one, which attributes
  the failure (:class:`~pipeline.jobs.group_commit.GroupCommit` does).
* Rows are written in job-id order, so two batches never lock in opposite orders.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

import asyncpg

from pipeline.errors import LeaseLost
from pipeline.identity import invoice_identity
from pipeline.jobs.credit_notes import flag_for_review, is_linkable, link_credit_note
from pipeline.jobs.duplicates import claim_invoices, flag_duplicate
from pipeline.jobs.near_duplicates import flag_possible_duplicate
from pipeline.jobs.records import (
    EVENT_COMPLETED,
    EVENT_REVIEW,
    BatchSettled,
    Settled,
    Success,
    settled_from_row,
)
from pipeline.jobs.settling import Settling, summarise_reasons
from pipeline.jobs.versions import flag_possible_amendment
from pipeline.queries import q
from pipeline.sealed_results import seal_result, seal_validation
from pipeline.states import JobState
from pipeline.usage import AttemptUsage

_DECISIONS = (JobState.SUCCEEDED, JobState.REVIEW_REQUIRED)

#: The SQLSTATE of ``attempt_not_running`` (migration 019): the batch rolled back.
ATTEMPT_NOT_RUNNING = "FL001"


class BatchSettling(Settling):
    """The job store's batched completion (mixed into :class:`~pipeline.jobs.store.JobStore`)."""

    async def succeed_many(self, successes: Sequence[Success]) -> BatchSettled:
        """Commit validated results of several attempts in one transaction.

        See the module invariants: a stale fence fails alone (reported in
        ``lost``), everything else of the batch commits or nothing does.

        Raises:
            ValueError: a job appears twice, or a decision is neither SUCCEEDED
                nor REVIEW_REQUIRED (nothing is written).
            LeaseLost: a job row settled but its attempt row was not running;
                the batch rolled back.
        """
        if not successes:
            return BatchSettled(settled=[], lost=[])
        batch = sorted(successes, key=lambda s: s.lease.job_id)
        ids = [s.lease.job_id for s in batch]
        if len(set(ids)) != len(ids):
            raise ValueError("a job appears twice in one batch")
        wrong = [s.decision for s in batch if s.decision not in _DECISIONS]
        if wrong:
            raise ValueError(f"succeed_many() takes SUCCEEDED or REVIEW_REQUIRED, not {wrong}")
        async with self.pool.acquire() as conn:
            if self.settle_hooks or self._claims_invoices(batch) or _links(batch):
                async with conn.transaction():
                    supersedes: dict[uuid.UUID, uuid.UUID] = {}
                    if self.settings.duplicate_invoice_check:
                        # As succeed() does: versions first, then the first job to commit
                        # an invoice owns it. A stale attempt's claim names its own job,
                        # which a later owner of the job keeps.
                        batch, amended, supersedes = await self._claim_versions(conn, batch)
                        secret = await self._key_secret(conn)
                        batch, flagged = await _claim_all(conn, secret, batch, amended)
                        batch = await self._flag_possible_duplicates(conn, batch, flagged | amended)
                    if _links(batch):
                        batch = await _link_credit_notes(conn, await self._key_secret(conn), batch)
                    won = {
                        job: replace(s, supersedes=supersedes.get(job))
                        for job, s in (await self._settle_statement(conn, batch)).items()
                    }
                    await self._run_hooks_many(conn, _in_batch_order(won, batch))
            else:  # nothing to write but the one statement: it is its own transaction
                won = await self._settle_statement(conn, batch)
                await self._run_hooks_many(conn, _in_batch_order(won, batch))
        by_order = {s.lease.job_id: n for n, s in enumerate(successes)}
        settled = sorted(won.values(), key=lambda s: by_order[s.job_id])
        lost = [s.lease for s in successes if s.lease.job_id not in won]
        return BatchSettled(settled=settled, lost=lost)

    async def _claim_versions(
        self, conn: asyncpg.Connection, batch: Sequence[Success]
    ) -> tuple[list[Success], set[uuid.UUID], dict[uuid.UUID, uuid.UUID]]:
        """The version step of each job (:mod:`pipeline.jobs.versions`; one statement for
        the identities not seen before, then job order):
        the batch with possible amendments settled for review, those jobs, and the job
        each superseding job superseded."""
        out: list[Success] = []
        amended: set[uuid.UUID] = set()
        supersedes: dict[uuid.UUID, uuid.UUID] = {}
        found = await self._claim_versions_of(
            conn,
            [(s.lease.tenant_id, s.lease.job_id, s.result) for s in batch],
            {s.lease.job_id: s.validation for s in batch},
        )
        for s in batch:
            version = found[s.lease.job_id]
            if version is None:
                out.append(s)
            elif version.superseded:
                supersedes[s.lease.job_id] = version.other_job
                out.append(s)
            else:
                amended.add(s.lease.job_id)
                out.append(
                    replace(
                        s,
                        decision=JobState.REVIEW_REQUIRED,
                        validation=flag_possible_amendment(s.validation, version),
                    )
                )
        return out, amended, supersedes

    async def _flag_possible_duplicates(
        self, conn: asyncpg.Connection, batch: Sequence[Success], flagged: set[uuid.UUID]
    ) -> list[Success]:
        """The batch, each job not ``flagged`` a duplicate already settled for review
        ``possible_duplicate`` when another job holds a near key of its invoice."""
        open_ = [s for s in batch if s.lease.job_id not in flagged]
        found = await self._possible_duplicates(
            conn, [(s.lease.tenant_id, s.lease.job_id, s.result) for s in open_]
        )
        return [
            s
            if (possible := found.get(s.lease.job_id)) is None
            else replace(
                s,
                decision=JobState.REVIEW_REQUIRED,
                validation=flag_possible_duplicate(s.validation, possible),
            )
            for s in batch
        ]

    def _claims_invoices(self, batch: Sequence[Success]) -> bool:
        """True when settling ``batch`` claims an invoice identity (a statement of its own)."""
        return self.settings.duplicate_invoice_check and any(
            invoice_identity(s.result) is not None for s in batch
        )

    async def _settle_statement(
        self, conn: asyncpg.Connection, batch: Sequence[Success]
    ) -> dict[uuid.UUID, Settled]:
        """Run ``job_settle_batch_if_fenced``: the settled jobs by id (a stale one is absent).

        Raises:
            LeaseLost: a settled job's attempt row was not running (SQLSTATE FL001); the
                statement failed, so nothing of the batch is written.
        """
        reviews = [_review_reasons(s) for s in batch]
        usages = [s.usage or AttemptUsage() for s in batch]
        # the result's text and its report's details sealed at rest
        # (pipeline/sealed_results.py), after every check read them open
        results = [
            await seal_result(self.data_keys, conn, s.lease.tenant_id, s.lease.job_id, s.result)
            for s in batch
        ]
        validations = [
            await seal_validation(
                self.data_keys, conn, s.lease.tenant_id, s.lease.job_id, s.validation
            )
            for s in batch
        ]
        try:
            rows = await conn.fetch(
                q("job_settle_batch_if_fenced"),
                [s.lease.job_id for s in batch],
                [s.lease.fence for s in batch],
                [s.decision.value for s in batch],
                [f"extraction_results/{s.lease.job_id}" for s in batch],
                [s.policy_version for s in batch],
                ["validation" if r is not None else None for r in reviews],
                self.clock.now(),
                reviews,
                results,
                validations,
                [_outcome(s.decision) for s in batch],
                [u.prompt_tokens for u in usages],
                [u.completion_tokens for u in usages],
                [u.cached_tokens for u in usages],
                [u.engine for u in usages],
                [uuid.uuid4() for _ in batch],
                EVENT_COMPLETED,
                EVENT_REVIEW,
            )
        except asyncpg.PostgresError as exc:
            if getattr(exc, "sqlstate", None) == ATTEMPT_NOT_RUNNING:
                raise LeaseLost(str(exc)) from exc
            raise
        return {r["id"]: settled_from_row(r) for r in rows}


async def _claim_all(
    conn: asyncpg.Connection, secret: bytes, batch: Sequence[Success], skip: set[uuid.UUID]
) -> tuple[list[Success], set[uuid.UUID]]:
    """The batch, each settled for review ``duplicate_invoice`` when another job holds
    its invoice (one statement for the invoices no job holds yet), and those jobs.
    The jobs in ``skip`` (held for review already) claim nothing."""
    others = await claim_invoices(
        conn,
        secret,
        [
            (s.lease.tenant_id, s.lease.job_id, s.result)
            for s in batch
            if s.lease.job_id not in skip
        ],
    )
    out = [
        s
        if (other := others.get(s.lease.job_id)) is None
        else replace(
            s, decision=JobState.REVIEW_REQUIRED, validation=flag_duplicate(s.validation, other)
        )
        for s in batch
    ]
    return out, {job for job, other in others.items() if other is not None}


def _links(batch: Sequence[Success]) -> bool:
    """Whether settling ``batch`` links a credit note (a statement of its own)."""
    return any(is_linkable(s.result) for s in batch)


async def _link_credit_notes(
    conn: asyncpg.Connection, secret: bytes, batch: Sequence[Success]
) -> list[Success]:
    """The batch, each credit note linked to the invoice it credits or settled for review
    when the tenant has none or several (:mod:`pipeline.jobs.credit_notes`)."""
    out: list[Success] = []
    for s in batch:
        link = (
            await link_credit_note(conn, secret, s.lease.tenant_id, s.lease.job_id, s.result)
            if is_linkable(s.result)
            else None
        )
        out.append(
            s
            if link is None
            else replace(
                s, decision=JobState.REVIEW_REQUIRED, validation=flag_for_review(s.validation, link)
            )
        )
    return out


def _in_batch_order(won: dict[uuid.UUID, Settled], batch: Sequence[Success]) -> list[Settled]:
    """The settled jobs of ``batch`` in its (job-id) order."""
    return [won[s.lease.job_id] for s in batch if s.lease.job_id in won]


def _outcome(decision: JobState) -> str:
    return "succeeded" if decision is JobState.SUCCEEDED else "review_required"


def _review_reasons(s: Success) -> str | None:
    """``last_error`` of a REVIEW_REQUIRED job: its reason codes (as ``succeed`` writes)."""
    if s.decision is not JobState.REVIEW_REQUIRED:
        return None
    return summarise_reasons(s.validation.get("reasons") or [])
