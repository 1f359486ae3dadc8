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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast

from opentelemetry import trace as trace_api

from pipeline import checkpoints
from pipeline.admission import AdmissionGate, Grant
from pipeline.documents import DocumentStore, MediaType, PageOcr
from pipeline.errors import (
    FencelineError,
    LeaseLost,
    MalformedOutput,
    ProviderRateLimited,
    RetryableError,
    TerminalError,
)
from pipeline.extraction import (
    EINVOICE_READER,
    Completion,
    Engine,
    ExtractionCall,
    Messages,
    prepare_call,
)
from pipeline.hooks import Hook, Hooks
from pipeline.invoice import TenantMasterData
from pipeline.jobs import GroupCommit, JobStore, Lease, Settled, Success
from pipeline.logs import job_log_context
from pipeline.queries import q
from pipeline.states import JobState
from pipeline.tenants import MasterDataCache
from pipeline.tracing import (
    SPAN_ADMISSION,
    SPAN_ATTEMPT,
    SPAN_ENGINE,
    SPAN_SETTLE,
    SPAN_VALIDATE,
    child_span,
    job_span,
    set_error,
    set_timeout,
)
from pipeline.usage import AttemptUsage
from pipeline.validation import DEFAULT_POLICY, Decision, ValidationPolicy, unvalidated_outcome
from pipeline.worker import ocr_proof
from pipeline.worker.admitting import admission_request, admit
from pipeline.worker.call_bounds import CallBounds
from pipeline.worker.call_spans import describe_call
from pipeline.worker.call_usage import recorded_usage, spent_usage
from pipeline.worker.contracts import AttemptReport, Unlimited, WorkerConfig
from pipeline.worker.document_stage import DocumentStage, DocumentText, keep_text
from pipeline.worker.interpretation import interpret, interpret_einvoice
from pipeline.worker.ocr_proof import OcrConfidences

log = logging.getLogger(__name__)


#: Run after an attempt's outcome committed (no connection: nothing to write with).
CompletedCallback = Hook[None, Settled]


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
        documents: DocumentStore | None = None,
        ocr: PageOcr | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.config = config
        self.admission: AdmissionGate = admission or Unlimited()
        self.policy = policy
        self.on_settled: Hooks[None, Settled] = Hooks([on_settled] if on_settled else [])
        self.today = today or (lambda: datetime.now(UTC))
        #: Suppliers and currencies per tenant, re-read after the cache's TTL.
        self.master_data = master_data or MasterDataCache()
        self.commits = GroupCommit(store, max_batch=config.settle_batch)
        #: Files come from ``documents``; a driver without one retries a file's job.
        #: Pages without text are OCR'd by ``ocr`` (a Ray pool), else in this process.
        self.documents = DocumentStage(documents, max_pages=config.max_document_pages, ocr=ocr)
        self.bounds = CallBounds(config)

    async def run(self, lease: Lease) -> AttemptReport:
        """One attempt under ``lease``, in its own span of the job's trace."""
        attrs = {
            "fenceline.job_id": str(lease.job_id),
            "fenceline.tenant": str(lease.tenant_id),
            "fenceline.attempt": lease.attempt,
            "fenceline.fence": lease.fence,
            "fenceline.worker": lease.worker_id,
            "fenceline.max_attempts": lease.max_attempts,
        }
        with job_span(SPAN_ATTEMPT, lease.traceparent, attrs) as span, job_log_context(lease):
            log.info("attempt started")
            lost = asyncio.Event()
            beat = asyncio.create_task(self._heartbeat(lease, lost), name=f"hb-{lease.job_id}")
            try:
                report = await self._attempt(lease, lost)
            finally:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beat
                self.bounds.forget(lease)
            span.set_attribute("fenceline.outcome", report.outcome)
            if report.outcome not in ("succeeded", "review_required"):
                set_error(span, report.outcome, report.detail)
            log.info("attempt ended: %s %s", report.outcome, report.detail)
            return report

    async def _heartbeat(self, lease: Lease, lost: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_seconds)
            try:
                self.bounds.renewed(lease, await self.store.heartbeat(lease))
            except LeaseLost:
                log.warning("job %s fence %s: lease lost", lease.job_id, lease.fence)
                lost.set()
                return
            except Exception:  # a transient DB error: the next beat retries
                log.exception("heartbeat failed for job %s", lease.job_id)

    async def _load(
        self, lease: Lease
    ) -> tuple[str, TenantMasterData, bool, DocumentText, OcrConfidences | None]:
        """The document's text, the tenant's master data, whether OCR read the text,
        what the document stage read (an e-invoice's XML among it), and the confidence
        of each word OCR read, from the words kept with the text (None where OCR read
        nothing, or none were kept)."""
        async with self.store.pool.acquire() as conn:
            doc = await conn.fetchrow(q("document_get"), lease.document_id, lease.tenant_id)
            master = await self.master_data.get(conn, lease.tenant_id)
        if doc is None:
            raise TerminalError(f"document {lease.document_id} missing for job {lease.job_id}")
        read = await self.documents.read(doc)
        text, words = read.text, read.words
        if read.derived_by is not None:
            text, words = await keep_text(self.store.pool, doc, text, read.derived_by, words)
        # The first writer's words (a retry reads them back): every attempt proves the
        # values OCR read against the words of the text they were found in.
        confidences = OcrConfidences.from_words(words) if read.by_ocr else None
        return text, master, read.by_ocr, read, confidences

    async def _attempt(self, lease: Lease, lost: asyncio.Event) -> AttemptReport:
        try:
            text, master, by_ocr, read, confidences = await self._load(lease)
        except TerminalError as exc:  # no document, a changed or unreadable file
            return await self._fail(lease, exc)
        except RetryableError as exc:  # the document store did not answer
            return await self._retry(lease, exc, None)
        if read.einvoice is not None:  # the XML states the invoice: no model call
            page = None if read.media_type == MediaType.XML.value else text
            return await self._commit_einvoice(lease, text, master, read.einvoice, page)
        try:
            request = prepare_call(
                text,
                contract=self.config.contract,
                include_schema=self.config.include_schema_in_prompt,
                limits=self.config.limits,
            )
        except TerminalError as exc:  # over a document limit, or its CPU budget spent
            return await self._fail(lease, exc)
        budget = request.budget(self.config.max_output_tokens)
        timeout = self.bounds.time_left(lease)
        if timeout <= 1:
            return await self._retry(lease, RetryableError("no time left for an attempt"), None)
        try:
            with child_span(
                SPAN_ADMISSION,
                {
                    "fenceline.prompt_tokens": budget.prompt_tokens,
                    "fenceline.max_output_tokens": budget.max_output_tokens,
                },
            ) as admission_span:
                try:
                    grant = await admit(
                        self.admission,
                        admission_request(lease, budget.prompt_tokens, budget.max_output_tokens),
                        lease,
                        self.bounds,
                        call_timeout=self.config.admission_timeout_seconds,
                        lost=lost,
                    )
                except FencelineError as exc:
                    set_error(admission_span, exc.error_class, str(exc))
                    raise
        except RetryableError as exc:
            return await self._retry(lease, exc, None)
        except TerminalError as exc:  # e.g. a reservation no budget can ever admit
            return await self._fail(lease, exc)
        if grant is None:  # the lease was lost while waiting for admission
            await self.store.record_late_result(lease, None)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost")
        timeout, bound = self.bounds.bound(lease)
        with child_span(
            SPAN_ENGINE,
            {
                "fenceline.engine": self.engine.name,
                "fenceline.timeout_seconds": round(max(timeout, 1.0), 3),
                "fenceline.timeout_bound": bound,
                "gen_ai.request.max_tokens": budget.max_output_tokens,
                "gen_ai.usage.input_tokens.estimated": budget.prompt_tokens,
            },
        ) as engine_span:
            call = asyncio.create_task(
                self.engine.complete(
                    cast(Messages, request.messages),
                    json_schema=request.json_schema,
                    max_tokens=budget.max_output_tokens,
                    timeout=max(timeout, 1.0),
                )
            )
            watch = asyncio.create_task(lost.wait())
            try:
                done, _ = await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # A drain cancelled the attempt (its lease is released next): abort the
                # call, which asyncio.wait leaves running, and hand back the grant.
                watch.cancel()
                call.cancel()
                await asyncio.shield(self._release_uncertain(grant))
                raise
            watch.cancel()
            if call not in done:
                call.cancel()  # the lease is gone; abort the engine call (it may still bill)
                with contextlib.suppress(BaseException):
                    await call
                set_timeout(engine_span, "lease", "lease lost during the call")
            else:
                describe_call(engine_span, call, bound)
        if call not in done:
            await self.admission.release(grant, usage=None, uncertain=True)
            await self.store.record_late_result(lease, None)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost")
        try:
            completion = call.result()
        except RetryableError as exc:
            spent = spent_usage(exc, self.engine.name)
            # Reported usage settles the charge exactly (a truncated answer was billed).
            uncertain = exc.uncertain and spent is None
            await self.admission.release(grant, usage=spent, uncertain=uncertain)
            if isinstance(exc, ProviderRateLimited) and exc.retry_after:
                await self.admission.cooldown(exc.retry_after)
            return await self._retry(lease, exc, spent)
        except TerminalError as exc:
            spent = spent_usage(exc, self.engine.name)
            await self.admission.release(grant, usage=spent, uncertain=False)
            return await self._fail(lease, exc, spent)
        checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)  # answered, nothing committed
        usage = recorded_usage(completion.usage, completion.pool or completion.engine)
        await self.admission.release(grant, usage=usage, uncertain=False)
        return await self._commit(
            lease, text, master, completion, usage, request, by_ocr, confidences
        )

    async def _release_uncertain(self, grant: Grant) -> None:
        try:
            await self.admission.release(grant, usage=None, uncertain=True)
        except Exception:  # the grant's TTL frees it in the end
            log.exception("admission release failed")

    async def _commit(
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
                return await self._succeed(
                    lease, result, validation, JobState.REVIEW_REQUIRED, usage, completion
                )
            return await self._retry(lease, exc, usage, completion)
        except TerminalError as exc:  # reading the answer spent the document's CPU budget
            return await self._fail(lease, exc, usage)
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

    async def _commit_einvoice(
        self,
        lease: Lease,
        text: str,
        master: TenantMasterData,
        xml: bytes,
        page_text: str | None,
    ) -> AttemptReport:
        """Settle an e-invoice read from its XML: validated like an answer, 0 tokens."""
        with child_span(SPAN_VALIDATE, {"fenceline.contract": EINVOICE_READER}) as vspan:
            outcome = interpret_einvoice(
                xml,
                text,
                master,
                today=self.today().date(),
                policy=self.policy,
                page_text=page_text,
            )
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
        usage = AttemptUsage(prompt_tokens=0, completion_tokens=0, engine=EINVOICE_READER)
        return await self._succeed(
            lease, outcome.result(), outcome.report.as_dict(), decision, usage, None
        )

    async def _succeed(
        self,
        lease: Lease,
        result: dict[str, Any],
        validation: dict[str, Any],
        decision: JobState,
        usage: AttemptUsage,
        completion: Completion | None,
    ) -> AttemptReport:
        try:
            settled = await self._settle(
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

    async def _fail(
        self, lease: Lease, exc: TerminalError, usage: AttemptUsage | None = None
    ) -> AttemptReport:
        """Fail the job terminally, its error class as the reason."""
        await self._settle(
            self.store.fail(
                lease,
                error_class=exc.error_class,
                reason=exc.error_class,
                detail=str(exc),
                usage=usage,
            )
        )
        return AttemptReport(lease.job_id, lease.fence, "failed_terminal", str(exc))

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
