"""Human review of REVIEW_REQUIRED jobs: approve → SUCCEEDED, reject → FAILED_TERMINAL.

REVIEW_REQUIRED has its own SLO and is never counted as automatic success
(spec section 5); only a reviewer's decision moves a job out of it. Invariants:

* The decision is **tenant-scoped** (another tenant's job is 404) and
  **conditional** on ``state = 'REVIEW_REQUIRED'`` and the ``state_version`` the
  reviewer saw, so two reviewers cannot both decide, and a decision made on a
  stale view is refused (409) instead of overwriting a newer state.
* Only a result that passed schema validation may be **approved**. A job sent
  to review because every attempt returned malformed output holds the raw
  model text (``validation.schema_valid = false``, see
  :func:`pipeline.validation.decide.unvalidated_outcome`): approving it would deliver
  something no rule has checked, so approval is refused (409
  ``result_not_approvable``, also enforced in the conditional update) and the
  reviewer can only reject it.
* The state change, the audit row (``review_decisions``: who, what, note,
  versions), the outbox event (``extraction.completed.v1`` on approval, so ERP
  delivery proceeds; ``extraction.failed.v1`` on rejection) and the job store's
  settle hooks commit in one transaction or not at all. The job store writes
  them (:meth:`pipeline.jobs.JobStore.decide_review`); this service checks who
  may decide what, inside the same transaction.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal, NoReturn

import asyncpg
from pydantic import BaseModel, ConfigDict, Field

from pipeline.api.problems import UNSAFE_NOTE_NOTE, ApiProblem, refuse_unsafe_text, safe_text_schema
from pipeline.api.submission import JsonInt
from pipeline.database import fetch_owned
from pipeline.errors import NotFound, VersionConflict
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Principal

#: Scopes that may decide reviews.
REVIEW_SCOPES = frozenset({"review", "operator"})


async def job_for_review(
    conn: asyncpg.Connection, query: str, principal: Principal, job_id: uuid.UUID, action: str
) -> asyncpg.Record:
    """The principal's job ``job_id`` as the SQL ``query`` reads it, for a reviewer.

    The job is found first, so another tenant's job is 404 whatever the scopes.

    Raises:
        NotFound: no such job for this tenant.
        ApiProblem: 403 without a review scope (``action`` says what needed it).
    """
    job = await fetch_owned(conn, query, job_id, principal.tenant_id, "job")
    if not REVIEW_SCOPES & principal.scopes:
        raise ApiProblem(403, f"{action} reviews needs the review scope", reason="scope")
    return job


#: A reviewer's note: required text, newlines kept, under the stored-text rule.
NoteText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4000,
        pattern=r"^[^\x00]*$",
        description=UNSAFE_NOTE_NOTE,
        json_schema_extra=safe_text_schema(multiline=True),
    ),
]


class ReviewDecisionIn(BaseModel):
    """A reviewer's decision on the version of the job they inspected."""

    model_config = ConfigDict(extra="forbid", strict=True)

    decision: Literal["approve", "reject"]
    note: NoteText
    state_version: JsonInt = Field(
        ge=1, le=2_000_000_000, description="The state_version the reviewer saw."
    )


class ReviewDecisionOut(BaseModel):
    review_id: uuid.UUID
    job_id: uuid.UUID
    decision: Literal["approve", "reject"]
    state: JobState
    state_version: int
    created_at: datetime


class ReviewService:
    """Applies review decisions; see the module docstring for the invariants."""

    def __init__(self, pool: asyncpg.Pool, store: JobStore, settings: Settings) -> None:
        self.pool = pool
        self.store = store
        self.settings = settings

    async def decide(
        self, principal: Principal, job_id: uuid.UUID, body: ReviewDecisionIn
    ) -> ReviewDecisionOut:
        """Apply ``body`` to the principal's job ``job_id``.

        Raises:
            NotFound: no such job for this tenant.
            ApiProblem: 403 without a review scope; 409 when the job is not awaiting
                review, its state_version moved on, ``approve`` meets a result
                that failed schema validation, or ``approve`` of a possible amendment
                whose earlier version another decision superseded first
                (``version_conflict``); 422 ``unsafe_text`` for a note with a hidden
                character.
        """
        refuse_unsafe_text("note", body.note, multiline=True)
        async with (
            self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds) as conn,
            conn.transaction(),
        ):
            visible = await job_for_review(
                conn, "job_get_review_state_for_tenant", principal, job_id, "deciding"
            )
            if body.decision == "approve":
                _refuse_unvalidated(job_id, visible)
            try:
                decided = await self.store.decide_review(
                    conn,
                    job_id=job_id,
                    tenant_id=principal.tenant_id,
                    key_id=principal.key_id,
                    decision=body.decision,
                    note=body.note,
                    state_version=body.state_version,
                )
            except VersionConflict as exc:
                raise ApiProblem(409, str(exc), reason="version_conflict") from exc
            if decided is None:
                await self._refuse(conn, principal, job_id, body)
        return ReviewDecisionOut(
            review_id=decided.review_id,
            job_id=job_id,
            decision=body.decision,
            state=decided.settled.state,
            state_version=decided.settled.state_version,
            created_at=decided.created_at,
        )

    async def _refuse(
        self,
        conn: asyncpg.Connection,
        principal: Principal,
        job_id: uuid.UUID,
        body: ReviewDecisionIn,
    ) -> NoReturn:
        """Raise 409 naming the job's current state (it is the caller's own job)."""
        current = await conn.fetchrow(
            q("job_get_review_state_for_tenant"), job_id, principal.tenant_id
        )
        if current is None:  # pragma: no cover - seen a moment ago in this transaction
            raise NotFound(f"job {job_id}")
        if body.decision == "approve" and current["state_version"] == body.state_version:
            _refuse_unvalidated(job_id, current)
        if current["state"] != JobState.REVIEW_REQUIRED.value:
            detail = f"the job is {current['state']}, not awaiting review"
        else:
            detail = (
                f"state_version {body.state_version} is stale; the job is at "
                f"{current['state_version']}"
            )
        raise ApiProblem(
            409,
            detail,
            reason="review_conflict",
            job_id=str(job_id),
            state=current["state"],
            state_version=current["state_version"],
        )


def _refuse_unvalidated(job_id: uuid.UUID, job: asyncpg.Record) -> None:
    """Raise 409 if ``job`` awaits review with a result that may not be approved: one
    that failed schema validation, or one holding values the job's schema_version has
    no place for (``contract_v3_required``)."""
    if job["state"] != JobState.REVIEW_REQUIRED.value:
        return
    if not job["schema_valid"]:
        why = "the job's result is raw model output that failed schema validation"
    elif job["contract_v3_required"]:
        why = (
            "the job's result holds contract v3 values its schema_version 1 has no place "
            "for; submit the document again with schema_version 3"
        )
    else:
        return
    raise ApiProblem(
        409,
        f"{why}; it cannot be approved, only rejected",
        reason="result_not_approvable",
        job_id=str(job_id),
        state=job["state"],
        state_version=job["state_version"],
    )
