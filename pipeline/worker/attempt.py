"""One attempt of one job, end to end.

:class:`AttemptRunner` owns a lease for the length of one attempt:

1. a heartbeat task extends the lease under the fence; when it finds the lease
   lost it cancels the engine call (the provider may still bill it);
2. admission is acquired for the attempt's token reservation before the call,
   and released with the engine's reported usage after it (uncertain outcomes
   stay charged); the job's request options reach the attempt here
   (:mod:`pipeline.worker.job_options`): ``ocr_languages`` the document stage,
   ``model_policy`` the pool the engine runs it on and the scope admission asks;
3. the engine call is bounded by the attempt timeout *and* the job's deadline;
4. each ending is handed to :class:`~pipeline.worker.outcomes.AttemptOutcomes`,
   which interprets the output and commits the outcome under the fence:
   success/review with result and outbox event, a persisted retry, or a terminal
   failure.

:class:`~pipeline.worker.loop.DriverLoop` keeps a driver's attempts running.
Nothing here imports Ray: ``cluster/drivers.py`` wraps it in an actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import asyncpg

from pipeline import checkpoints
from pipeline.admission import AdmissionGate, Grant
from pipeline.data_keys import document_subject
from pipeline.documents import DocumentStore, MediaType, PageOcr, TenantOcr
from pipeline.errors import (
    FencelineError,
    LeaseLost,
    ProviderRateLimited,
    RetryableError,
    TerminalError,
)
from pipeline.extraction import (
    Engine,
    Messages,
    prepare_call,
)
from pipeline.hooks import Hook, Hooks
from pipeline.invoice import TenantMasterData
from pipeline.jobs import GroupCommit, JobStore, Lease, Settled
from pipeline.logs import job_log_context
from pipeline.queries import q
from pipeline.tenants import MasterDataCache
from pipeline.tracing import (
    SPAN_ADMISSION,
    SPAN_ATTEMPT,
    SPAN_ENGINE,
    child_span,
    job_span,
    set_error,
    set_timeout,
)
from pipeline.validation import DEFAULT_POLICY, ValidationPolicy
from pipeline.worker.admitting import admission_request, admit
from pipeline.worker.call_bounds import CallBounds
from pipeline.worker.call_spans import describe_call
from pipeline.worker.call_usage import recorded_usage, spent_usage
from pipeline.worker.contracts import AttemptReport, Unlimited, WorkerConfig
from pipeline.worker.document_stage import DocumentStage, DocumentText, keep_text
from pipeline.worker.job_options import JobRequestOptions, routed_pool
from pipeline.worker.ocr_proof import OcrConfidences
from pipeline.worker.outcomes import AttemptOutcomes

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
        ocr: PageOcr | TenantOcr | None = None,
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
        #: Pages without text are OCR'd by ``ocr`` (a Ray pool, shared by tenant), else here.
        self.documents = DocumentStage(documents, max_pages=config.max_document_pages, ocr=ocr)
        self.bounds = CallBounds(config)
        self.outcomes = AttemptOutcomes(
            store, self.commits, config, policy, self.on_settled, self.today
        )

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
            row = await conn.fetchrow(q("document_get"), lease.document_id, lease.tenant_id)
            # the texts sealed at rest, opened here (a shredded key fails the attempt)
            doc = None if row is None else await self._opened(conn, row)
            master = await self.master_data.get(conn, lease.tenant_id, keys=self.store.data_keys)
            options = JobRequestOptions.of(
                await conn.fetchval(q("job_options_get_for_tenant"), lease.job_id, lease.tenant_id)
            )
        if doc is None:
            raise TerminalError(f"document {lease.document_id} missing for job {lease.job_id}")
        read = await self.documents.read(doc, ocr_languages=options.ocr_languages)
        text, words = read.text, read.words
        if read.derived_by is not None:
            text, words = await keep_text(
                self.store.pool, doc, text, read.derived_by, words, keys=self.store.data_keys
            )
        # The first writer's words (a retry reads them back): every attempt proves the
        # values OCR read against the words of the text they were found in.
        confidences = OcrConfidences.from_words(words) if read.by_ocr else None
        return text, master, read.by_ocr, read, confidences

    async def _opened(self, conn: asyncpg.Connection, row: asyncpg.Record) -> dict[str, Any]:
        """A ``document_get`` row with its pasted and derived texts opened."""
        subject = document_subject(row["sha256"])
        keys = self.store.data_keys
        return await keys.open_fields(
            conn, row["tenant_id"], row, subject, "content", "derived_text"
        )

    async def _attempt(self, lease: Lease, lost: asyncio.Event) -> AttemptReport:
        try:
            text, master, by_ocr, read, confidences = await self._load(lease)
        except TerminalError as exc:  # no document, a changed or unreadable file
            return await self.outcomes.fail(lease, exc)
        except RetryableError as exc:  # the document store did not answer
            return await self.outcomes.retry(lease, exc, None)
        if read.einvoice is not None:  # the XML states the invoice: no model call
            page = None if read.media_type == MediaType.XML.value else text
            return await self.outcomes.einvoice(lease, master, read.einvoice, page)
        try:
            request = prepare_call(
                text,
                contract=self.config.contract,
                include_schema=self.config.include_schema_in_prompt,
                limits=self.config.limits,
            )
        except TerminalError as exc:  # over a document limit, or its CPU budget spent
            return await self.outcomes.fail(lease, exc)
        budget = request.budget(self.config.max_output_tokens)
        timeout = self.bounds.time_left(lease)
        if timeout <= 1:
            return await self.outcomes.retry(
                lease, RetryableError("no time left for an attempt"), None
            )
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
                        admission_request(
                            lease,
                            budget.prompt_tokens,
                            budget.max_output_tokens,
                            pool=routed_pool(lease),
                        ),
                        lease,
                        self.bounds,
                        call_timeout=self.config.admission_timeout_seconds,
                        lost=lost,
                    )
                except FencelineError as exc:
                    set_error(admission_span, exc.error_class, str(exc))
                    raise
        except RetryableError as exc:
            return await self.outcomes.retry(lease, exc, None)
        except TerminalError as exc:  # e.g. a reservation no budget can ever admit
            return await self.outcomes.fail(lease, exc)
        if grant is None:  # the lease was lost while waiting for admission
            await self.store.record_late_result(lease, None)
            return AttemptReport(lease.job_id, lease.fence, "lease_lost")
        timeout, bound = self.bounds.bound(lease)
        with child_span(
            SPAN_ENGINE,
            {
                "fenceline.engine": self.engine.name,
                "fenceline.model_policy": lease.model_policy,
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
                    pool=routed_pool(lease),
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
            return await self.outcomes.retry(lease, exc, spent)
        except TerminalError as exc:
            spent = spent_usage(exc, self.engine.name)
            await self.admission.release(grant, usage=spent, uncertain=False)
            return await self.outcomes.fail(lease, exc, spent)
        checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)  # answered, nothing committed
        usage = recorded_usage(completion.usage, completion.pool or completion.engine)
        await self.admission.release(grant, usage=usage, uncertain=False)
        return await self.outcomes.interpreted(
            lease, text, master, completion, usage, request, by_ocr, confidences
        )

    async def _release_uncertain(self, grant: Grant) -> None:
        try:
            await self.admission.release(grant, usage=None, uncertain=True)
        except Exception:  # the grant's TTL frees it in the end
            log.exception("admission release failed")
