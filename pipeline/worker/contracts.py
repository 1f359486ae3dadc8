"""What an attempt needs and returns: the gate it asks when no budget applies,
the driver's knobs, and the report of one attempt
(:class:`~pipeline.worker.attempt.AttemptRunner`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.admission import AdmissionRequest, GateUsage, Grant, Reconciliation, Wait
from pipeline.extraction import DEFAULT_CONTRACT, DEFAULT_LIMITS, Completion, DocumentLimits


class Unlimited:
    """No admission budget (tests of the job protocol alone; never the default run):
    every request is granted at once, and nothing is counted."""

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        del timeout
        return Grant(
            grant_id=str(uuid.uuid4()),
            scope="unlimited",
            tenant=request.tenant,
            priority=request.priority,
            prompt_tokens=request.prompt_tokens,
            max_output_tokens=request.max_output_tokens,
            reserved_tokens=request.reserved_tokens,
            granted_at=time.monotonic(),
            job_id=request.job_id,
            fence=request.fence,
        )

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool
    ) -> Reconciliation | None:
        del grant, usage, uncertain
        return None

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
    #: What a document may be and the CPU reading it may spend (``Settings``'
    #: ``max_document_*``, ``max_line_chars``, ``extraction_cpu_seconds``): a job whose
    #: document is over them fails terminally before the engine is called.
    limits: DocumentLimits = DEFAULT_LIMITS
    #: PDFs of more pages fail their job before a page is read (``max_document_pages``).
    max_document_pages: int = 200
    idle_poll_seconds: float = 2.0
    #: Most successes one transaction commits (group commit: those that finish while
    #: a commit is in flight go together in the next, each under its own fence;
    #: :mod:`pipeline.jobs.group_commit`); 1 commits every success alone.
    settle_batch: int = 16

    def __post_init__(self) -> None:
        # A config that crossed a process boundary as plain data (``asdict`` in the
        # runtime app's config, Ray's serialisation) carries its limits as a mapping.
        if isinstance(self.limits, Mapping):
            object.__setattr__(self, "limits", DocumentLimits(**self.limits))


@dataclass
class AttemptReport:
    job_id: uuid.UUID
    fence: int
    outcome: str
    detail: str = ""
    completion: Completion | None = None
