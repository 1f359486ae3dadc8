"""How one attempt's outcome is settled under its fence.

:class:`AttemptOutcomes` turns what an attempt ended with into one committed
state change: the model's answer interpreted (grounded and validated) and stored as
SUCCEEDED or REVIEW_REQUIRED, an e-invoice's XML read without a model call, a
persisted retry, or a terminal failure. Each commit is conditional on the lease's
fence (:mod:`pipeline.jobs`); a result that arrives after the lease was lost is
recorded on its closed attempt row and discarded. After a commit the settle hooks run
(the durable outbox event, written in the same transaction, is the source of truth).

:class:`~pipeline.worker.attempt.AttemptRunner` runs the attempt and hands each
ending here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry import trace as trace_api

from pipeline.errors import LeaseLost, MalformedOutput, RetryableError, TerminalError
from pipeline.extraction import Completion, ExtractionCall
from pipeline.hooks import Hooks
from pipeline.invoice import TenantMasterData
from pipeline.jobs import GroupCommit, JobStore, Lease, Settled, Success
from pipeline.states import JobState
from pipeline.tracing import SPAN_SETTLE, SPAN_VALIDATE, child_span, set_error
from pipeline.usage import AttemptUsage
from pipeline.validation import Decision, ValidationPolicy, unvalidated_outcome
from pipeline.worker import ocr_proof
from pipeline.worker.contracts import AttemptReport, WorkerConfig
from pipeline.worker.interpretation import interpret, interpret_einvoice
from pipeline.worker.ocr_proof import OcrConfidences

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttemptOutcomes:
    """Settles attempts' outcomes for one runner: its store, group commit, validation
    policy, settle hooks and clock."""

    store: JobStore
    commits: GroupCommit
    config: WorkerConfig
    policy: ValidationPolicy
    on_settled: Hooks[None, Settled]
    today: Callable[[], datetime]

    async def interpreted(
        self,
        lease: Lease,
        text: str,
        master: TenantMasterData,
        completion: Completion,
        usage: AttemptUsage,
        request: ExtractionCall,
        by_ocr: bool = False,
        confidences: OcrConfidences | None = None,
    ) -> AttemptReport:
        if confidences is not None and confidences.pages:
            # The OCR word lists load once per process, on the first OCR'd job that
            # needs them (~30 s): off the event loop, so leases keep their heartbeats.
            await asyncio.to_thread(ocr_proof.default_lexicon)
        try:
            with child_span(SPAN_VALIDATE, {"fenceline.contract": request.contract}) as vspan:
                try:
                    outcome = interpret(
                        completion.text,
                        text,
                        master,
                        today=self.today().date(),
                        policy=self.policy,
                        contract=request.contract,
                        limits=self.config.limits,
                        read_by_ocr=by_ocr,
                        ocr=confidences,
                    )
                except (MalformedOutput, TerminalError) as exc:
                    vspan.set_attribute("fenceline.decision", exc.error_class)
                    set_error(vspan, exc.error_class, str(exc))
                    raise
                vspan.set_attribute("fenceline.decision", outcome.report.decision.value)
                vspan.set_attribute(
                    "fenceline.reasons",
                    [str(r.get("code", r)) for r in outcome.report.as_dict().get("reasons", [])],
                )
        except MalformedOutput as exc:
            last = lease.attempt >= lease.max_attempts
            if last and self.policy.malformed_exhausted_state is JobState.REVIEW_REQUIRED:
                result, validation = unvalidated_outcome(completion.text, str(exc), self.policy)
                return await self.succeed(
                    lease, result, validation, JobState.REVIEW_REQUIRED, usage, completion
                )
            return await self.retry(lease, exc, usage, completion)
        except TerminalError as exc:  # reading the answer spent the document's CPU budget
            return await self.fail(lease, exc, usage)
        report = outcome.report
        decision = (
            JobState.SUCCEEDED
            if report.decision is Decision.SUCCEEDED
            else JobState.REVIEW_REQUIRED
        )
        return await self.succeed(
            lease,
            outcome.result(),
            report.as_dict(),
            decision,
            usage,
            completion,
        )

    async def einvoice(
        self,
        lease: Lease,
        master: TenantMasterData,
        xml: bytes,
        page_text: str | None,
    ) -> AttemptReport:
        """Settle an e-invoice read from its XML: validated like an answer, 0 tokens,
        under the contract the job asked for (``lease.schema_version``)."""
        with child_span(SPAN_VALIDATE) as vspan:
            outcome = interpret_einvoice(
                xml,
                master,
                schema_version=lease.schema_version,
                today=self.today().date(),
                policy=self.policy,
                page_text=page_text,
            )
            reader = outcome.reader or ""
            vspan.set_attribute("fenceline.contract", reader)
            vspan.set_attribute("fenceline.decision", outcome.report.decision.value)
            vspan.set_attribute(
                "fenceline.reasons",
                [str(r.get("code", r)) for r in outcome.report.as_dict().get("reasons", [])],
            )
        decision = (
            JobState.SUCCEEDED
            if outcome.report.decision is Decision.SUCCEEDED
            else JobState.REVIEW_REQUIRED
        )
        usage = AttemptUsage(prompt_tokens=0, completion_tokens=0, engine=reader)
        return await self.succeed(
            lease, outcome.result(), outcome.report.as_dict(), decision, usage, None
        )

    async def succeed(
        self,
        lease: Lease,
        result: dict[str, Any],
        validation: dict[str, Any],
        decision: JobState,
        usage: AttemptUsage,
        completion: Completion | None,
    ) -> AttemptReport:
        try:
            settled = await self.settle(
                self.commits.succeed(
                    Success(
                        lease,
                        result=result,
                        validation=validation,
                        decision=decision,
                        policy_version=str(validation.get("policy_version", self.policy.version)),
                        usage=usage,
                    )
                )
            )
        except LeaseLost:
            await self.store.record_late_result(lease, usage)
            return AttemptReport(
                lease.job_id, lease.fence, "stale_result_discarded", completion=completion
            )
        # The store may settle a duplicate supplier invoice for review instead.
        return AttemptReport(
            lease.job_id, lease.fence, settled.state.value.lower(), completion=completion
        )

    async def fail(
        self, lease: Lease, exc: TerminalError, usage: AttemptUsage | None = None
    ) -> AttemptReport:
        """Fail the job terminally, its error class as the reason."""
        await self.settle(
            self.store.fail(
                lease,
                error_class=exc.error_class,
                reason=exc.error_class,
                detail=str(exc),
                usage=usage,
            )
        )
        return AttemptReport(lease.job_id, lease.fence, "failed_terminal", str(exc))

    async def retry(
        self,
        lease: Lease,
        exc: RetryableError,
        usage: AttemptUsage | None,
        completion: Completion | None = None,
    ) -> AttemptReport:
        try:
            settled = await self.settle(self.store.retry_or_fail(lease, exc, usage=usage))
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

    async def settle(self, outcome: Awaitable[Settled]) -> Settled:
        attempt_span = trace_api.get_current_span()  # the attempt's: no step span is open here
        with child_span(SPAN_SETTLE) as span:
            try:
                settled = await outcome
            except LeaseLost as exc:
                set_error(span, exc.error_class, str(exc))
                raise
            span.set_attribute("fenceline.state", settled.state.value)
            span.set_attribute("fenceline.fence", settled.fence)
            if settled.reason:
                span.set_attribute("fenceline.reason", settled.reason)
            if settled.retry_at is not None:
                # The retry decision, on the attempt's span too: why and when it runs again.
                for s in (span, attempt_span):
                    s.set_attribute("fenceline.retry.decision", settled.state.value)
                    s.set_attribute("fenceline.retry.at", settled.retry_at.isoformat())
                    s.set_attribute("fenceline.retry.reason", settled.reason or "")
        try:
            await self.on_settled.run(None, settled)
        except Exception:  # the durable outbox event is the source of truth
            log.exception("settle hand-off failed for job %s", settled.job_id)
        return settled
