"""The durable job store: fenced leases, outcomes and review decisions.

Acceptance (a request becoming a job, idempotently) is :mod:`pipeline.jobs.acceptance`,
the reaper :mod:`pipeline.jobs.reaping`, batched successes
:mod:`pipeline.jobs.batch_settling`; :class:`JobStore` composes them. Its records
(requests, leases, outcomes, event names) live in :mod:`pipeline.jobs.records`.

Invariants this module keeps (the tests in ``tests/integration/test_jobs*.py``
and the stateful model check them):

* A claim is one short transaction (``FOR UPDATE SKIP LOCKED``); it bumps
  ``attempt`` and ``fence`` and opens an attempt row. Inference runs after commit.
* Every later write by a driver is conditional on ``state = 'RUNNING'``, its
  fence and an unexpired lease; zero rows raises :class:`LeaseLost` and the
  transaction (result, attempt row, outbox event) rolls back as a whole.
* The reaper moves expired leases on with ``fence + 1``, so the stale owner can
  never commit; attempts never reset.
* Terminal failures write ``extraction.failed.v1`` and a dead-letter event in
  the same transaction, so a failed DLQ publication is retried from durable state.

Why one class over four modules, not composed collaborators (weighed in issue 42):
the concepts split by module — :class:`~pipeline.jobs.settling.Settling` holds the
shared state (pool, settings, clock, retry policy, rng, metrics, settle hooks) and the
writes every outcome makes in its transaction (attempt row, events, hooks); acceptance,
reaping and batched settling each add their own methods; this module adds leases,
single outcomes and review. The three bases share no method name and override nothing,
so the MRO only gathers them. Each of them needs nearly the whole shared state and its
in-transaction writes, so a collaborator would take the whole store anyway, while
``JobStore`` would have to forward five public signatures (``accept``,
``admit_and_accept``, ``warm_accept``, ``reap``, ``succeed_many``) that its callers in
``api/``, ``worker/`` and ``cluster/`` use, and expose or reach into those private writes.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import asyncpg

from pipeline.database import fetch_owned
from pipeline.errors import LeaseLost, RetryableError, VersionConflict
from pipeline.jobs.acceptance import Accepting
from pipeline.jobs.batch_settling import BatchSettling
from pipeline.jobs.credit_notes import flag_for_review, is_linkable, link_credit_note
from pipeline.jobs.duplicates import claim_invoice, flag_duplicate
from pipeline.jobs.explain import explain
from pipeline.jobs.near_duplicates import flag_possible_duplicate
from pipeline.jobs.reaping import Reaping
from pipeline.jobs.records import (
    EVENT_COMPLETED,
    EVENT_FAILED,
    EVENT_REVIEW,
    Lease,
    ReviewDecided,
    Settled,
    lease_from_row,
    settled_from_row,
)
from pipeline.jobs.settling import summarise_reasons
from pipeline.jobs.versions import flag_possible_amendment, supersede_on_approval
from pipeline.queries import q
from pipeline.sealed_results import open_result, seal_result, seal_validation
from pipeline.states import JobState
from pipeline.usage import AttemptUsage

log = logging.getLogger(__name__)


class JobStore(Accepting, Reaping, BatchSettling):
    """asyncpg job store; all SQL comes from ``sql/queries/jobs.sql``.

    Outcomes one at a time here; several successes in one transaction:
    :meth:`~pipeline.jobs.batch_settling.BatchSettling.succeed_many`.
    """

    # ------------------------------------------------------------------ leases
    async def claim(
        self, worker_id: str, *, limit: int = 1, lease_seconds: float | None = None
    ) -> list[Lease]:
        """Claim up to ``limit`` due jobs, fairly across tenants, in one short transaction.

        ``job_claim_available`` is one statement (pick, UPDATE and attempt rows in one
        CTE), so it runs as its own implicit transaction: atomic, its row locks held
        to its end, and one round trip where an explicit BEGIN/COMMIT made three.
        """
        seconds = lease_seconds or self.settings.lease_seconds
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                q("job_claim_available"), self.clock.now(), limit, float(seconds), worker_id
            )
        return [lease_from_row(r, worker_id) for r in rows]

    async def heartbeat(self, lease: Lease, *, lease_seconds: float | None = None) -> datetime:
        """Extend the lease; :class:`LeaseLost` if the caller no longer owns the job."""
        seconds = lease_seconds or self.settings.lease_seconds
        async with self.pool.acquire() as conn:
            until = await conn.fetchval(
                q("lease_extend_if_fenced"),
                lease.job_id,
                lease.fence,
                float(seconds),
                self.clock.now(),
            )
        if until is None:
            raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: heartbeat matched no row")
        return cast(datetime, until)

    # ---------------------------------------------------------------- outcomes
    async def succeed(
        self,
        lease: Lease,
        *,
        result: dict[str, Any],
        validation: dict[str, Any] | None = None,
        decision: JobState = JobState.SUCCEEDED,
        policy_version: str | None = None,
        usage: AttemptUsage | None = None,
    ) -> Settled:
        """Commit a validated result under the fence (SUCCEEDED or REVIEW_REQUIRED).

        The result row, the attempt's close, the completion outbox event and any
        settle hooks (e.g. delivery creation) commit together or not at all. A
        result whose supplier invoice another job already holds is settled
        REVIEW_REQUIRED ``duplicate_invoice`` instead (:mod:`pipeline.jobs.duplicates`);
        one another job's invoice may duplicate (same supplier and number, another
        total; or a number printed differently) ``possible_duplicate``
        (:mod:`pipeline.jobs.near_duplicates`); a credit note is linked to the invoice
        it credits, or reviewed when it names none the tenant has
        (:mod:`pipeline.jobs.credit_notes`).
        """
        if decision not in (JobState.SUCCEEDED, JobState.REVIEW_REQUIRED):
            raise ValueError(f"succeed() takes SUCCEEDED or REVIEW_REQUIRED, not {decision}")
        validation = validation or {}
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            version = await self._claim_version(
                conn, lease.tenant_id, lease.job_id, result, validation
            )
            supersedes = version.other_job if version and version.superseded else None
            other = (
                await claim_invoice(
                    conn, await self._key_secret(conn), lease.tenant_id, lease.job_id, result
                )
                if self.settings.duplicate_invoice_check and not (version and supersedes is None)
                else None
            )
            if version is not None and supersedes is None:
                decision = JobState.REVIEW_REQUIRED
                validation = flag_possible_amendment(validation, version)
            elif other is not None:
                decision = JobState.REVIEW_REQUIRED
                validation = flag_duplicate(validation, other)
            elif possible := (
                await self._possible_duplicates(conn, [(lease.tenant_id, lease.job_id, result)])
            )[lease.job_id]:
                decision = JobState.REVIEW_REQUIRED
                validation = flag_possible_duplicate(validation, possible)
            if is_linkable(result) and (
                link := await link_credit_note(
                    conn, await self._key_secret(conn), lease.tenant_id, lease.job_id, result
                )
            ):
                decision = JobState.REVIEW_REQUIRED
                validation = flag_for_review(validation, link)
            reasons = validation.get("reasons") or []
            row = await conn.fetchrow(
                q("job_settle_if_fenced"),
                lease.job_id,
                lease.fence,
                decision.value,
                f"extraction_results/{lease.job_id}",
                policy_version,
                now,
                "validation" if decision is JobState.REVIEW_REQUIRED else None,
                summarise_reasons(reasons) if decision is JobState.REVIEW_REQUIRED else None,
            )
            if row is None:
                raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: completion rejected")
            # the result's text sealed at rest (pipeline/sealed_results.py), after
            # every check above read it open
            stored = await seal_result(self.data_keys, conn, lease.tenant_id, lease.job_id, result)
            report = await seal_validation(
                self.data_keys, conn, lease.tenant_id, lease.job_id, validation
            )
            await conn.execute(
                q("result_insert"), lease.job_id, lease.fence, stored, report, decision.value
            )
            outcome = "succeeded" if decision is JobState.SUCCEEDED else "review_required"
            await self._close_attempt(conn, lease, outcome, None, None, usage, uncertain=False)
            event = EVENT_COMPLETED if decision is JobState.SUCCEEDED else EVENT_REVIEW
            settled = replace(settled_from_row(row), supersedes=supersedes)
            await self._event(conn, settled, event)
            await self._run_hooks(conn, settled)
        return settled

    async def retry_or_fail(
        self, lease: Lease, error: RetryableError, *, usage: AttemptUsage | None = None
    ) -> Settled:
        """Persist a failed attempt: RETRY_SCHEDULED at the policy's time, or terminal.

        The decision uses the database's time, the persisted attempt count and the
        job's deadline; the provider's ``retry_after`` is honoured (never sooner).
        """
        async with self.pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchrow(
                q("job_lock_if_fenced"), lease.job_id, lease.fence, self.clock.now()
            )
            if locked is None:
                raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: retry rejected")
            decision = self.policy.decide(
                now=locked["now"],
                attempt=locked["attempt"],
                deadline=locked["deadline_at"],
                retry_after=error.retry_after,
                max_attempts=locked["max_attempts"],
                rng=self.rng,
            )
            if decision.retry_at is None:
                reason = decision.terminal_reason or "attempts_exhausted"
                return await self._fail_locked(
                    conn, lease, error.error_class, str(error), reason, usage, error.uncertain
                )
            row = await conn.fetchrow(
                q("job_retry_if_fenced"),
                lease.job_id,
                lease.fence,
                decision.retry_at,
                error.error_class,
                str(error)[:2000],
                self.clock.now(),
            )
            if row is None:  # pragma: no cover - row is locked above
                raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: retry rejected")
            await self._close_attempt(
                conn,
                lease,
                "retry_scheduled",
                error.error_class,
                str(error),
                usage,
                uncertain=error.uncertain,
            )
            settled = settled_from_row(row, retry_at=row["available_at"], reason=error.error_class)
            await self._run_hooks(conn, settled)
            return settled

    async def fail(
        self,
        lease: Lease,
        *,
        error_class: str,
        reason: str,
        detail: str = "",
        usage: AttemptUsage | None = None,
    ) -> Settled:
        """Fail the job terminally under the fence (e.g. a :class:`TerminalError`)."""
        async with self.pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchrow(
                q("job_lock_if_fenced"), lease.job_id, lease.fence, self.clock.now()
            )
            if locked is None:
                raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: failure rejected")
            return await self._fail_locked(
                conn, lease, error_class, detail or reason, reason, usage, False
            )

    async def release(self, lease: Lease, *, reason: str = "released by a draining driver") -> bool:
        """Give back a lease this driver still holds (a drain): due again now, fence+1.

        The job goes to RETRY_SCHEDULED available now, under a new fence (so this
        holder's late commit can never land) and with one more attempt allowed (the
        given-back attempt did not fail); its attempt row closes as ``released``,
        in the same transaction. Returns False, changing nothing, when the lease
        was already settled, lost or expired (the row count says so): the job is
        then finished or someone else's, never abandoned by this call.
        """
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                q("job_release_if_fenced"), lease.job_id, lease.fence, self.clock.now(), reason
            )
            if row is None:
                return False
            await self._close_attempt(
                conn, lease, "released", "lease_released", reason, None, uncertain=True
            )
        return True

    async def record_late_result(self, lease: Lease, usage: AttemptUsage | None) -> bool:
        """Note on a closed attempt that its (stale) result arrived and was discarded.

        The provider call still happened and may be billed; the attempt row keeps
        its usage so cost accounting and ``explain`` show it.
        """
        u = usage or AttemptUsage()
        async with self.pool.acquire() as conn:
            got = await conn.fetchval(
                q("attempt_record_late_result"),
                lease.job_id,
                lease.fence,
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                self.clock.now(),
            )
        return got is not None

    # ------------------------------------------------------------------ review
    async def decide_review(
        self,
        conn: asyncpg.Connection,
        *,
        job_id: uuid.UUID,
        tenant_id: uuid.UUID,
        key_id: uuid.UUID | None,
        decision: str,
        note: str | None,
        state_version: int,
    ) -> ReviewDecided | None:
        """A reviewer's ``approve`` / ``reject`` of a REVIEW_REQUIRED job, in ``conn``'s
        transaction.

        Conditional on ``state = 'REVIEW_REQUIRED'``, the ``state_version`` the
        reviewer saw and (for approval) an approvable result; ``None`` when that no
        longer holds, and nothing is written. Otherwise the state change, the
        audit row, the outbox event (``extraction.completed.v1`` on approval,
        ``extraction.failed.v1`` on rejection) and the settle hooks share the
        transaction. Approving a ``possible_amendment`` supersedes the version it
        names in that transaction too (:mod:`pipeline.jobs.versions`).

        Raises:
            VersionConflict: the approval would supersede a version another decision
                superseded first, or the job's own version was superseded while it
                waited; the caller rolls its transaction back.
        """
        approve = decision == "approve"
        to_state = JobState.SUCCEEDED if approve else JobState.FAILED_TERMINAL
        row = await conn.fetchrow(
            q("job_decide_review_if_pending"), job_id, tenant_id, state_version, to_state.value
        )
        if row is None:
            return None
        settled = settled_from_row(row, reason="review_approved" if approve else "review_rejected")
        if approve:  # a possible amendment supersedes the version it names
            supersedes = await self._supersede_on_approval(conn, tenant_id, job_id)
            settled = replace(settled, supersedes=supersedes)
        audit = await conn.fetchrow(
            q("review_decision_insert"),
            uuid.uuid4(),
            job_id,
            tenant_id,
            key_id,
            decision,
            note,
            state_version,
            to_state.value,
            settled.state_version,
        )
        extra: dict[str, Any] = {"review": decision}
        if not approve:
            extra.update(reason="review_rejected", error_class="review_rejected")
        await self._event(conn, settled, EVENT_COMPLETED if approve else EVENT_FAILED, extra)
        await self._run_hooks(conn, replace(settled, decided_at=audit["created_at"]))
        return ReviewDecided(settled, audit["id"], audit["created_at"])

    async def _supersede_on_approval(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID
    ) -> uuid.UUID | None:
        """An approved ``possible_amendment`` supersedes the version it names, and the job
        then claims its own invoice identity and near keys (it held none while flagged).
        Returns the superseded job: that one, or the one this job superseded when it
        committed (``auto_supersede``, held for review for another reason), whose
        withdrawal the ERP receives now that this job is delivered.

        Raises:
            VersionConflict: that version was superseded by another decision first, or
                this job's own version was superseded while it waited for review.
        """
        row = await conn.fetchrow(q("result_for_review_supersede"), job_id, tenant_id)
        if row is None:
            return None
        if row["superseded_by"] is not None:
            raise VersionConflict(
                f"job {job_id}'s invoice version was superseded by job {row['superseded_by']}"
            )
        if not self.settings.duplicate_invoice_check:
            return None
        validation = row["validation"] or {}
        # the result's text is sealed at rest (pipeline/sealed_results.py): the
        # invoice's identity is read from it opened
        result = await open_result(self.data_keys, conn, tenant_id, job_id, row["result"] or {})
        secret = await self._key_secret(conn)
        old = await supersede_on_approval(conn, secret, tenant_id, job_id, result, validation)
        if old is None:
            superseded: uuid.UUID | None = row["supersedes"]
            return superseded
        await claim_invoice(conn, secret, tenant_id, job_id, result)
        await self._possible_duplicates(conn, [(tenant_id, job_id, result)])
        return old

    # ------------------------------------------------------------------- reads
    async def get(self, tenant_id: uuid.UUID, job_id: uuid.UUID) -> dict[str, Any]:
        """The job as its tenant may see it; another tenant's job is :class:`NotFound`."""
        async with self.pool.acquire() as conn:
            row = await fetch_owned(conn, "job_get_for_tenant", job_id, tenant_id, "job")
        return dict(row.items())

    async def explain(self, job_id: uuid.UUID) -> dict[str, Any]:
        """Operator view: everything the job went through (:mod:`pipeline.jobs.explain`)."""
        async with self.pool.acquire() as conn:
            return await explain(conn, job_id, keys=self.data_keys)

    async def backlog(self) -> dict[str, Any]:
        """Waiting, runnable and running counts and the oldest runnable job's age."""
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(q("job_backlog_stats"), self.clock.now())
        return dict(row.items())
