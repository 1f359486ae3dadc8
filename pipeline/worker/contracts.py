"""What an attempt needs and returns: the admission gate it asks, the driver's
knobs, and the report of one attempt (:class:`~pipeline.worker.attempt.AttemptRunner`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.extraction import DEFAULT_CONTRACT, DEFAULT_LIMITS, Completion, DocumentLimits
from pipeline.usage import AttemptUsage


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
    #: What a document may be and the CPU reading it may spend (``Settings``'
    #: ``max_document_*``, ``max_line_chars``, ``extraction_cpu_seconds``): a job whose
    #: document is over them fails terminally before the engine is called.
    limits: DocumentLimits = DEFAULT_LIMITS
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
