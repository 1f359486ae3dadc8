"""One attempt of one job, end to end.

:class:`AttemptRunner` owns a lease for the length of one attempt:

1. a heartbeat task extends the lease under the fence; when it finds the lease
   lost it cancels the engine call (the provider may still bill it);
2. admission is acquired for the attempt's token reservation before the call,
   and released with the engine's reported usage after it (uncertain outcomes
   stay charged);
3. the engine call is bounded by the attempt timeout *and* the job's deadline;
4. the output is parsed and validated, and the outcome committed under the
   fence: success/review with result and outbox event, a persisted retry, or a
   terminal failure. A result that arrives after the lease was lost is recorded
   on its (closed) attempt row and discarded.

:class:`~pipeline.worker.loop.DriverLoop` keeps a driver's attempts running.
Nothing here imports Ray: ``cluster/drivers.py`` wraps it in an actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pipeline import checkpoints
from pipeline.errors import (
    AdmissionDeferred,
    FencelineError,
    LeaseLost,
    MalformedOutput,
    ProviderRateLimited,
    RetryableError,
    TerminalError,
)
from pipeline.extraction import (
    DEFAULT_CONTRACT,
    Completion,
    Engine,
    ExtractionCall,
    Messages,
    interpret,
    prepare_call,
)
from pipeline.jobs import JobStore, Lease, Settled
from pipeline.queries import q
from pipeline.states import JobState
from pipeline.tenants import MasterDataCache
from pipeline.usage import AttemptUsage, ReportedUsage
from pipeline.validation import (
    DEFAULT_POLICY,
    Decision,
    TenantMasterData,
    ValidationPolicy,
    unvalidated_outcome,
)

log = logging.getLogger(__name__)


class AdmissionGate(Protocol):
    """The slice of the admission budget a driver needs (see ``cluster/admission.py``)."""

    async def acquire(
        self,
        *,
        tenant: str,
        prompt_tokens: int,
        max_output_tokens: int,
        priority: int,
        timeout: float,
        job_id: str | None = None,
        fence: int | None = None,
    ) -> Any:
        """Block until granted; raise :class:`RetryableError` if not granted in time."""
        ...

    async def release(self, grant: Any, *, usage: AttemptUsage | None, uncertain: bool) -> None: ...

    async def cooldown(self, seconds: float) -> None: ...


class Unlimited:
    """No admission budget (tests of the job protocol alone; never the default run)."""

    async def acquire(self, **_: Any) -> Any:
        return None

    async def release(self, grant: Any, **_: Any) -> None:
        del grant

    async def cooldown(self, seconds: float) -> None:
        del seconds


@dataclass(frozen=True)
class WorkerConfig:
    """Per-driver knobs; the timeout math keeps lease > attempt + commit margin."""

    worker_id: str
    concurrency: int = 4
    claim_batch: int = 4
    attempt_timeout_seconds: float = 45.0
    commit_margin_seconds: float = 5.0
    heartbeat_seconds: float = 30.0
    admission_timeout_seconds: float = 300.0
    #: A cap on ``max_tokens`` below what the contract derives from each document.
    max_output_tokens: int | None = None
    include_schema_in_prompt: bool = False
    #: The extraction contract (``pipeline.extraction.extractor.CONTRACTS``) new attempts use.
    contract: str = DEFAULT_CONTRACT
    idle_poll_seconds: float = 2.0


@dataclass
class AttemptReport:
    job_id: uuid.UUID
    fence: int
    outcome: str
    detail: str = ""
    completion: Completion | None = None


CompletedCallback = Callable[[Settled], Awaitable[None]]

#: Sentinel: the lease was lost while waiting for admission.
_LOST = object()


class AttemptRunner:
    """Runs attempts for leases this driver holds."""

    def __init__(
        self,
        store: JobStore,
        engine: Engine,
        config: WorkerConfig,
        *,
        admission: AdmissionGate | None = None,
        policy: ValidationPolicy = DEFAULT_POLICY,
        on_settled: CompletedCallback | None = None,
        today: Callable[[], datetime] | None = None,
        master_data: MasterDataCache | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.config = config
        self.admission: AdmissionGate = admission or Unlimited()
        self.policy = policy
        self.on_settled = on_settled
        self.today = today or (lambda: datetime.now(UTC))
        #: Suppliers and currencies per tenant, re-read after the cache's TTL.
        self.master_data = master_data or MasterDataCache()

    async def run(self, lease: Lease) -> AttemptReport:
        lost = asyncio.Event()
        beat = asyncio.create_task(self._heartbeat(lease, lost), name=f"hb-{lease.job_id}")
        try:
            return await self._attempt(lease, lost)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat

    async def _heartbeat(self, lease: Lease, lost: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_seconds)
            try:
                await self.store.heartbeat(lease)
            except LeaseLost:
                log.warning("job %s fence %s: lease lost", lease.job_id, lease.fence)
                lost.set()
                return
            except Exception:  # a transient DB error: the next beat retries
                log.exception("heartbeat failed for job %s", lease.job_id)

    def _time_left(self, lease: Lease) -> float:
        """Seconds the engine call may take: the attempt timeout, bounded by the deadline
        (less a commit margin) and, only when heartbeats cannot renew it in time, the lease."""
        now = datetime.now(UTC)
        to_deadline = (lease.deadline_at - now).total_seconds() - self.config.commit_margin_seconds
        lease_left = (lease.lease_until - now).total_seconds()
        to_lease = (
            lease_left - self.config.commit_margin_seconds
            if self.config.heartbeat_seconds >= lease_left
            else float("inf")
        )
        return min(self.config.attempt_timeout_seconds, to_deadline, to_lease)

    async def _load(self, lease: Lease) -> tuple[str, TenantMasterData]:
        async with self.store.pool.acquire() as conn:
            doc = await conn.fetchrow(q("document_get"), lease.document_id, lease.tenant_id)
            master = await self.master_data.get(conn, lease.tenant_id)
        if doc is None:
            raise TerminalError(f"document {lease.document_id} missing for job {lease.job_id}")
        return str(doc["content"]), master

    async def _attempt(self, lease: Lease, lost: asyncio.Event) -> AttemptReport:
        try:
            text, master = await self._load(lease)
        except TerminalError as exc:
            await self._settle(
                self.store.fail(
                    lease, error_class=exc.error_class, reason=exc.error_class, detail=str(exc)
                )
            )
            return AttemptReport(lease.job_id, lease.fence, "failed_terminal", str(exc))
        request = prepare_call(
            text,
            contract=self.config.contract,
            include_schema=self.config.include_schema_in_prompt,
        )
        budget = request.budget(self.config.max_output_tokens)
        timeout = self._time_left(lease)
        if timeout <= 1:
            return await self._retry(lease, RetryableError("no time left for an attempt"), None)
        try:
            grant = await self._admit(lease, budget.prompt_tokens, budget.max_output_tokens, lost)
        except RetryableError as exc:
            return await self._retry(lease, exc, None)
        except TerminalError as exc:  # e.g. a reservation no budget can ever admit
            await self._settle(
                self.store.fail(
                    lease, error_class=exc.error_class, reason=exc.error_class, detail=str(exc)
                )
            )
            return AttemptReport(lease.job_id, lease.fence, "failed_terminal", str(exc))
        if grant is _LOST:
            await self.store.record_late_result(lease, None)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost")
        timeout = self._time_left(lease)
        call = asyncio.create_task(
            self.engine.complete(
                cast(Messages, request.messages),
                json_schema=request.json_schema,
                max_tokens=budget.max_output_tokens,
                timeout=max(timeout, 1.0),
            )
        )
        watch = asyncio.create_task(lost.wait())
        done, _ = await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        watch.cancel()
        if call not in done:
            call.cancel()  # the lease is gone; abort the engine call (it may still bill)
            with contextlib.suppress(BaseException):
                await call
            await self.admission.release(grant, usage=None, uncertain=True)
            await self.store.record_late_result(lease, None)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost")
        try:
            completion = call.result()
        except RetryableError as exc:
            spent = _spent(exc, self.engine.name)
            # Reported usage settles the charge exactly (a truncated answer was billed).
            uncertain = exc.uncertain and spent is None
            await self.admission.release(grant, usage=spent, uncertain=uncertain)
            if isinstance(exc, ProviderRateLimited) and exc.retry_after:
                await self.admission.cooldown(exc.retry_after)
            return await self._retry(lease, exc, spent)
        except TerminalError as exc:
            spent = _spent(exc, self.engine.name)
            await self.admission.release(grant, usage=spent, uncertain=False)
            await self._settle(
                self.store.fail(
                    lease,
                    error_class=exc.error_class,
                    reason=exc.error_class,
                    detail=str(exc),
                    usage=spent,
                )
            )
            return AttemptReport(lease.job_id, lease.fence, "failed_terminal", str(exc))
        checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)  # answered, nothing committed
        usage = _recorded(completion.usage, completion.pool or completion.engine)
        await self.admission.release(grant, usage=usage, uncertain=False)
        return await self._commit(lease, text, master, completion, usage, request)

    async def _admit(
        self, lease: Lease, prompt_tokens: int, max_output_tokens: int, lost: asyncio.Event
    ) -> Any:
        """Wait for admission while the lease lives, without spending the job's attempts.

        A ``Wait`` from the budget (surfaced as :class:`AdmissionDeferred`) is not a
        failed attempt: the driver keeps the lease (heartbeats continue) and asks
        again after the hint, until the attempt's time runs out; only then is a
        retry persisted. Returns ``_LOST`` if the lease is lost while waiting.
        """
        while True:
            left = self._time_left(lease)
            if left <= 1:
                raise AdmissionDeferred("no admission budget before the attempt's time ran out")
            try:
                return await self.admission.acquire(
                    tenant=str(lease.tenant_id),
                    prompt_tokens=prompt_tokens,
                    max_output_tokens=max_output_tokens,
                    priority=lease.priority,
                    timeout=min(self.config.admission_timeout_seconds, left),
                    job_id=str(lease.job_id),
                    fence=lease.fence,
                )
            except AdmissionDeferred as exc:
                pause = min(max(exc.retry_after or 1.0, 0.1), max(left - 1, 0.1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), pause)
                if lost.is_set():
                    return _LOST

    async def _commit(
        self,
        lease: Lease,
        text: str,
        master: TenantMasterData,
        completion: Completion,
        usage: AttemptUsage,
        request: ExtractionCall,
    ) -> AttemptReport:
        try:
            outcome = interpret(
                completion.text,
                text,
                master,
                today=self.today().date(),
                policy=self.policy,
                contract=request.contract,
            )
        except MalformedOutput as exc:
            last = lease.attempt >= lease.max_attempts
            if last and self.policy.malformed_exhausted_state is JobState.REVIEW_REQUIRED:
                result, validation = unvalidated_outcome(completion.text, str(exc), self.policy)
                return await self._succeed(
                    lease, result, validation, JobState.REVIEW_REQUIRED, usage, completion
                )
            return await self._retry(lease, exc, usage, completion)
        report = outcome.report
        decision = (
            JobState.SUCCEEDED
            if report.decision is Decision.SUCCEEDED
            else JobState.REVIEW_REQUIRED
        )
        return await self._succeed(
            lease,
            outcome.result(),
            report.as_dict(),
            decision,
            usage,
            completion,
        )

    async def _succeed(
        self,
        lease: Lease,
        result: dict[str, Any],
        validation: dict[str, Any],
        decision: JobState,
        usage: AttemptUsage,
        completion: Completion,
    ) -> AttemptReport:
        try:
            await self._settle(
                self.store.succeed(
                    lease,
                    result=result,
                    validation=validation,
                    decision=decision,
                    policy_version=str(validation.get("policy_version", self.policy.version)),
                    usage=usage,
                )
            )
        except LeaseLost:
            await self.store.record_late_result(lease, usage)
            return AttemptReport(
                lease.job_id, lease.fence, "stale_result_discarded", completion=completion
            )
        return AttemptReport(
            lease.job_id, lease.fence, decision.value.lower(), completion=completion
        )

    async def _retry(
        self,
        lease: Lease,
        exc: RetryableError,
        usage: AttemptUsage | None,
        completion: Completion | None = None,
    ) -> AttemptReport:
        try:
            settled = await self._settle(self.store.retry_or_fail(lease, exc, usage=usage))
        except LeaseLost:
            if usage is not None:
                await self.store.record_late_result(lease, usage)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost", str(exc))
        return AttemptReport(
            lease.job_id,
            lease.fence,
            settled.state.value.lower(),
            f"{exc.error_class}: {exc}",
            completion,
        )

    async def _settle(self, outcome: Awaitable[Settled]) -> Settled:
        settled = await outcome
        if self.on_settled is not None:
            try:
                await self.on_settled(settled)
            except Exception:  # the durable outbox event is the source of truth
                log.exception("settle hand-off failed for job %s", settled.job_id)
        return settled


def _recorded(u: ReportedUsage, engine: str) -> AttemptUsage:
    """An engine's reported usage as the attempt row records it."""
    return AttemptUsage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        cached_tokens=u.cached_tokens,
        engine=engine,
    )


def _spent(exc: FencelineError, engine: str) -> AttemptUsage | None:
    """The usage a failed call still reported (see ``FencelineError.usage``)."""
    return None if exc.usage is None else _recorded(exc.usage, exc.engine or engine)
