"""The job store's records: what goes in, what comes out, and the event names.

:mod:`pipeline.jobs.store` re-exports everything here; import from there.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

import asyncpg

from pipeline.hooks import Hook, Hooks
from pipeline.identity import content_digest
from pipeline.records import from_record
from pipeline.states import JobState
from pipeline.usage import AttemptUsage

EVENT_REQUESTED = "extraction.requested.v1"
EVENT_COMPLETED = "extraction.completed.v1"
EVENT_REVIEW = "extraction.review_required.v1"
EVENT_FAILED = "extraction.failed.v1"
EVENT_DEAD_LETTERED = "extraction.dead_lettered.v1"
EVENT_CANCELLED = "extraction.cancelled.v1"
#: The ERP's event for a SUCCEEDED credit note (contract v3 ``document_type:
#: credit_note``) in place of :data:`EVENT_COMPLETED`, naming the invoice it credits.
EVENT_CREDIT_NOTE_CREATED = "credit_note.created.v1"
#: Delivered for a job whose invoice version a later job superseded, before that job's
#: result (pipeline/jobs/versions.py).
EVENT_SUPERSEDED = "invoice.superseded.v1"


@dataclass(frozen=True)
class ObjectReference:
    """Where a file's bytes live in the document store (migration 023): the row keeps
    this, never the bytes.

    Attributes:
        uri: ``fenceline-store://<sha256>`` or ``s3://bucket/key``.
        version: the store's immutable version of the object.
        sha256: the bytes' digest (64 lowercase hex), checked at every read.
        size: the bytes' length.
        page_count: a PDF's pages; None for other media types.
    """

    uri: str
    version: str
    sha256: str
    size: int
    page_count: int | None = None


@dataclass(frozen=True)
class DocumentIn:
    """A document as received: the bytes decide its identity, not its name.

    A pasted text carries its ``content``; a file carries its ``reference`` (and an
    empty ``content``): its identity is then the reference's digest.
    """

    content: str = ""
    content_type: str = "text/plain"
    filename: str | None = None
    reference: ObjectReference | None = None

    @property
    def raw(self) -> bytes:
        return self.content.encode("utf-8")

    @property
    def sha256(self) -> str:
        if self.reference is not None:
            return self.reference.sha256
        return content_digest(self.raw)

    @property
    def size(self) -> int:
        """The document's bytes: the file's, or the text's in UTF-8."""
        return self.reference.size if self.reference is not None else len(self.raw)


@dataclass(frozen=True)
class AcceptRequest:
    tenant_id: uuid.UUID
    idempotency_key: str
    document: DocumentIn
    schema_version: int = 1
    model_policy: str = "default"
    options: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    estimated_tokens: int = 0
    deadline_seconds: float | None = None
    max_attempts: int | None = None


@dataclass(frozen=True)
class AdmissionCheck:
    """What the intake's one-statement accept (``intake_accept``) decides with,
    besides the request: the tenant's admission lock, the budget period, the
    caller's API key, the capacity verdict and the spend to reserve."""

    lock_namespace: int
    period: str
    api_key_id: uuid.UUID | None
    capacity_refused: bool
    cost: Decimal


@dataclass(frozen=True)
class Accepted:
    """The acceptance receipt: ``state`` and ``state_version`` as accepted.

    A replay (``created`` False) carries the same values as the first answer,
    however far the job has moved since.
    """

    job_id: uuid.UUID
    created: bool
    state: JobState
    state_version: int
    deadline_at: datetime
    document_id: uuid.UUID | None = None


def accepted_from_row(
    row: asyncpg.Record, *, created: bool, document_id: uuid.UUID | None = None
) -> Accepted:
    """The receipt a row with ``job_id``, ``accepted_state``, ``accepted_state_version``,
    ``deadline_at`` and ``document_id`` stands for (``job_accept_if_new``,
    ``job_get_by_idempotency_key``, ``intake_accept``)."""
    return from_record(
        Accepted,
        row,
        rename={"state": "accepted_state", "state_version": "accepted_state_version"},
        convert={"state": JobState},
        created=created,
        document_id=document_id if document_id is not None else row["document_id"],
    )


@dataclass(frozen=True)
class Lease:
    """Ownership of one job under one fence until ``lease_until``."""

    job_id: uuid.UUID
    tenant_id: uuid.UUID
    attempt: int
    fence: int
    lease_until: datetime
    deadline_at: datetime
    worker_id: str
    document_id: uuid.UUID | None
    object_version: str
    schema_version: int
    model_policy: str
    priority: int
    estimated_tokens: int
    max_attempts: int
    #: The job's trace (W3C traceparent from acceptance; pipeline/tracing.py).
    traceparent: str | None = None


@dataclass(frozen=True)
class ReviewDecided:
    """A committed review decision: the job's new state and the audit row's id and time."""

    settled: Settled
    review_id: uuid.UUID
    created_at: datetime


@dataclass(frozen=True)
class Settled:
    """A committed outcome, handed to hooks inside the same transaction."""

    job_id: uuid.UUID
    tenant_id: uuid.UUID
    state: JobState
    state_version: int
    attempt: int
    fence: int
    retry_at: datetime | None = None
    reason: str | None = None
    #: Acceptance and settle times when the transition returns them (the
    #: completion-latency SLI: accept → settled, pipeline/jobs/slis.py).
    created_at: datetime | None = None
    finished_at: datetime | None = None
    #: When a reviewer decided (review decisions only; the review-latency SLI).
    decided_at: datetime | None = None
    #: The job whose invoice version this one superseded (pipeline/jobs/versions.py):
    #: the delivery hook sends ``invoice.superseded.v1`` for it first.
    supersedes: uuid.UUID | None = None


@dataclass(frozen=True)
class Success:
    """A finished attempt's validated result, to commit under its lease's fence."""

    lease: Lease
    result: dict[str, Any]
    validation: dict[str, Any] = field(default_factory=dict)
    #: SUCCEEDED or REVIEW_REQUIRED.
    decision: JobState = JobState.SUCCEEDED
    policy_version: str | None = None
    usage: AttemptUsage | None = None


@dataclass(frozen=True)
class BatchSettled:
    """What one batch transaction committed, and which attempts it refused."""

    #: The committed outcomes, in the batch's order.
    settled: list[Settled]
    #: Leases whose fence or lease no longer held: nothing of theirs was written.
    lost: list[Lease]


@dataclass
class ReapReport:
    rescheduled: list[uuid.UUID] = field(default_factory=list)
    failed: list[uuid.UUID] = field(default_factory=list)
    deadline_failed: list[uuid.UUID] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.rescheduled) + len(self.failed) + len(self.deadline_failed)


#: Called inside the outcome transaction; raising rolls the outcome back.
SettleHook = Hook[asyncpg.Connection, Settled]
#: The job store's settle hooks (:class:`~pipeline.hooks.Hooks`, in the transaction).
SettleHooks = Hooks[asyncpg.Connection, Settled]


@runtime_checkable
class BatchSettleHook(Protocol):
    """A settle hook that can also take a whole batch at once (one statement, not one per
    job): :meth:`~pipeline.jobs.batch_settling.BatchSettling.succeed_many` calls
    :meth:`many` where a plain :data:`SettleHook` is called once per settled job."""

    async def __call__(self, conn: asyncpg.Connection, settled: Settled) -> None: ...

    async def many(self, conn: asyncpg.Connection, settled: Sequence[Settled]) -> None: ...


def lease_from_row(row: Any, worker_id: str) -> Lease:
    """The lease a claim row grants ``worker_id``."""
    return from_record(
        Lease,
        row,
        rename={"job_id": "id"},
        optional={"traceparent"},
        worker_id=worker_id,
    )


def settled_from_row(row: Any, **extra: Any) -> Settled:
    """The outcome a transition's ``RETURNING`` row describes."""
    return from_record(
        Settled,
        row,
        rename={"job_id": "id"},
        convert={"state": JobState},
        optional={"created_at", "finished_at"},
        # Never read from the row, even where it has such a column: only the caller says.
        **{"retry_at": None, "reason": None, "decided_at": None, "supersedes": None, **extra},
    )
