"""What settling a job writes inside its transaction, shared by every outcome.

The base of :class:`~pipeline.jobs.store.JobStore`: its construction (pool,
settings, clock, retry policy, settle hooks) and the writes every outcome makes
under the fence: the attempt row closed with its usage, the outbox events, the
settle hooks run in the same transaction (a hook that raises rolls it back).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.data_keys import DataKeys
from pipeline.errors import LeaseLost
from pipeline.jobs.near_duplicates import PossibleDuplicate, claim_near_keys, near_key_secret
from pipeline.jobs.records import (
    EVENT_DEAD_LETTERED,
    EVENT_FAILED,
    BatchSettleHook,
    Lease,
    Settled,
    SettleHooks,
    settled_from_row,
)
from pipeline.jobs.slis import JobMetrics, default_job_metrics
from pipeline.jobs.versions import VersionDecision, claim_version, claim_versions
from pipeline.queries import q
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.tracing import current_traceparent
from pipeline.usage import AttemptUsage


class Settling:
    """The job store's shared state and in-transaction writes."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
        rng: random.Random | None = None,
        metrics: JobMetrics | None = None,
    ) -> None:
        self.pool = pool
        #: The job SLIs (completion latency, outcomes, retries, review decisions).
        self.metrics = metrics or default_job_metrics()
        self.settings = settings or Settings()
        self.clock = clock or DatabaseClock()
        s = self.settings
        self.policy = policy or RetryPolicy(
            max_attempts=s.max_attempts,
            base_seconds=s.retry_base_seconds,
            cap_seconds=s.retry_cap_seconds,
            next_attempt_margin_seconds=s.next_attempt_margin_seconds,
            beyond_deadline=s.retry_beyond_deadline,
        )
        self.rng = rng or random.Random()
        #: Run in the transaction of every outcome, in order; raising rolls it back.
        self.settle_hooks = SettleHooks()
        self._near_key_secret: bytes | None = None
        #: Seals a tenant's document text at rest (FENCELINE_KEK; pipeline/data_keys.py).
        self.data_keys = DataKeys.from_settings(self.settings)

    async def _key_secret(self, conn: asyncpg.Connection) -> bytes:
        """The HMAC key of the near keys and version keys, read once."""
        if self._near_key_secret is None:
            self._near_key_secret = await near_key_secret(conn, self.settings)
        return self._near_key_secret

    async def _claim_version(
        self,
        conn: asyncpg.Connection,
        tenant_id: uuid.UUID,
        job_id: uuid.UUID,
        result: dict[str, Any],
        validation: Mapping[str, Any] | None = None,
    ) -> VersionDecision | None:
        """The version step of :mod:`pipeline.jobs.versions` (off with the duplicate check)."""
        if not self.settings.duplicate_invoice_check:
            return None
        secret = await self._key_secret(conn)
        return await claim_version(conn, secret, tenant_id, job_id, result, validation)

    async def _claim_versions_of(
        self,
        conn: asyncpg.Connection,
        claims: Sequence[tuple[uuid.UUID, uuid.UUID, dict[str, Any]]],
        validations: Mapping[uuid.UUID, Mapping[str, Any]] | None = None,
    ) -> dict[uuid.UUID, VersionDecision | None]:
        """:meth:`_claim_version` for a batch (one statement for unseen identities)."""
        if not self.settings.duplicate_invoice_check:
            return {job: None for _, job, _ in claims}
        return await claim_versions(conn, await self._key_secret(conn), claims, validations)

    async def _possible_duplicates(
        self,
        conn: asyncpg.Connection,
        claims: Sequence[tuple[uuid.UUID, uuid.UUID, dict[str, Any]]],
    ) -> dict[uuid.UUID, PossibleDuplicate | None]:
        """Claim the near keys of each ``(tenant, job, result)`` (:mod:`near_duplicates`);
        per job, the other job its invoice may duplicate. Nothing when the check is off."""
        if not (self.settings.duplicate_invoice_check and self.settings.possible_duplicate_check):
            return {job: None for _, job, _ in claims}
        return await claim_near_keys(conn, await self._key_secret(conn), claims)

    async def _fail_locked(
        self,
        conn: asyncpg.Connection,
        lease: Lease,
        error_class: str,
        detail: str,
        reason: str,
        usage: AttemptUsage | None,
        uncertain: bool,
    ) -> Settled:
        row = await conn.fetchrow(
            q("job_fail_if_fenced"),
            lease.job_id,
            lease.fence,
            error_class,
            detail[:2000],
            reason,
            self.clock.now(),
        )
        if row is None:  # pragma: no cover - caller locked the row
            raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: failure rejected")
        await self._close_attempt(
            conn, lease, "failed_terminal", error_class, detail, usage, uncertain=uncertain
        )
        settled = settled_from_row(row, reason=reason)
        await self._terminal_events(conn, settled, error_class, reason)
        await self._run_hooks(conn, settled)
        return settled

    async def _close_attempt(
        self,
        conn: asyncpg.Connection,
        lease: Lease,
        outcome: str,
        error_class: str | None,
        detail: str | None,
        usage: AttemptUsage | None,
        *,
        uncertain: bool,
    ) -> None:
        u = usage or AttemptUsage()
        got = await conn.fetchval(
            q("attempt_close_if_running"),
            lease.job_id,
            lease.fence,
            outcome,
            error_class,
            (detail or "")[:2000] or None,
            u.prompt_tokens,
            u.completion_tokens,
            u.cached_tokens,
            self.clock.now(),
            uncertain,
            u.engine,
        )
        if got is None:
            raise LeaseLost(f"job {lease.job_id} fence {lease.fence}: attempt already closed")

    async def _event(
        self,
        conn: asyncpg.Connection,
        s: Settled,
        event_type: str,
        extra: dict[str, Any] | None = None,
    ) -> None:
        payload = event_payload(s, extra)
        await conn.execute(
            q("outbox_insert"),
            uuid.uuid4(),
            s.job_id,
            event_type,
            payload,
            current_traceparent(),
        )

    async def _terminal_events(
        self, conn: asyncpg.Connection, s: Settled, error_class: str, reason: str
    ) -> None:
        extra = {"reason": reason, "error_class": error_class}
        await self._event(conn, s, EVENT_FAILED, extra)
        await self._event(conn, s, EVENT_DEAD_LETTERED, extra)

    async def _run_hooks(self, conn: asyncpg.Connection, s: Settled) -> None:
        await self.settle_hooks.run(conn, s)
        self.metrics.settled(s)

    async def _run_hooks_many(self, conn: asyncpg.Connection, settled: Sequence[Settled]) -> None:
        """:meth:`_run_hooks` for a batch: a :class:`BatchSettleHook` takes it in one call."""
        if not settled:
            return
        for hook in self.settle_hooks:
            if isinstance(hook, BatchSettleHook):
                await hook.many(conn, settled)
            else:
                for s in settled:
                    await hook(conn, s)
        for s in settled:
            self.metrics.settled(s)


def event_payload(s: Settled, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The payload of an outcome's outbox event."""
    payload: dict[str, Any] = {
        "job_id": str(s.job_id),
        "state": s.state.value,
        "state_version": s.state_version,
        "v": 1,
    }
    payload.update(extra or {})
    return payload


def summarise_reasons(reasons: Sequence[Any]) -> str:
    """A REVIEW_REQUIRED job's ``last_error``: its validation reason codes, a duplicate
    invoice naming the job that holds it."""
    codes = [
        f"{r.get('code', r)} of job {r['other_job_id']}"
        if isinstance(r, dict) and r.get("other_job_id")
        else str(r.get("code", r) if isinstance(r, dict) else r)
        for r in reasons
    ]
    return ", ".join(codes)[:2000] or "validation"
