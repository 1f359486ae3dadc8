"""The job state machine, written once here and enforced in SQL.

``sql/schema/001_core.sql`` holds the same transitions in the
``job_state_transitions`` table, which a trigger checks on every update of
``extraction_jobs.state``, and the same states in the ``state`` CHECK constraint;
``tests/integration/test_schema.py::test_python_and_sql_state_machines_agree``
proves the two agree (transitions, the exact set of states, and the settled
states of ``finished_exactly_when_settled``).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    #: Accepted durably; waiting for a driver. Left by a driver's claim, or by the
    #: reaper when the job's deadline passes first.
    READY = "READY"
    #: Owned by one driver under ``fence`` until ``lease_until``. Left by that
    #: driver's conditional completion / retry / failure, or by the reaper when the
    #: lease expires.
    RUNNING = "RUNNING"
    #: Waiting for ``available_at`` after a failed attempt. Left by a claim once due,
    #: or by the reaper when the deadline passes.
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    #: Validated result stored; eligible for ERP delivery. Final.
    SUCCEEDED = "SUCCEEDED"
    #: Inspectable but unacceptable result, withheld from delivery. Left only by a
    #: human review decision (approve → SUCCEEDED, reject → FAILED_TERMINAL).
    REVIEW_REQUIRED = "REVIEW_REQUIRED"
    #: Attempts or deadline exhausted, or a terminal error. Nothing automatic leaves
    #: it; only an operator's audited re-drive (``pipeline.jobs.redrive``) moves it
    #: back to READY with a fresh attempt budget under the same id.
    FAILED_TERMINAL = "FAILED_TERMINAL"
    #: Cancelled by its tenant or an operator before it settled (from READY,
    #: RETRY_SCHEDULED or RUNNING; ``pipeline.jobs.cancellation``). Final: nothing
    #: leaves it. A cancelled RUNNING job's fence moved on, so its attempt's late
    #: result is discarded as stale.
    CANCELLED = "CANCELLED"


#: Every allowed (from, to) pair. Self-transitions are not listed: a heartbeat
#: changes the lease, not the state.
TRANSITIONS: frozenset[tuple[JobState, JobState]] = frozenset(
    {
        (JobState.READY, JobState.RUNNING),
        (JobState.READY, JobState.FAILED_TERMINAL),
        (JobState.RETRY_SCHEDULED, JobState.RUNNING),
        (JobState.RETRY_SCHEDULED, JobState.FAILED_TERMINAL),
        (JobState.RUNNING, JobState.SUCCEEDED),
        (JobState.RUNNING, JobState.REVIEW_REQUIRED),
        (JobState.RUNNING, JobState.RETRY_SCHEDULED),
        (JobState.RUNNING, JobState.FAILED_TERMINAL),
        (JobState.REVIEW_REQUIRED, JobState.SUCCEEDED),
        (JobState.REVIEW_REQUIRED, JobState.FAILED_TERMINAL),
        (JobState.FAILED_TERMINAL, JobState.READY),  # operator re-drive only
        (JobState.READY, JobState.CANCELLED),  # tenant or operator cancellation only
        (JobState.RETRY_SCHEDULED, JobState.CANCELLED),
        (JobState.RUNNING, JobState.CANCELLED),  # fence + 1: the attempt's result is stale
    }
)

#: States a claim may pick up (once ``available_at`` has passed).
RUNNABLE: frozenset[JobState] = frozenset({JobState.READY, JobState.RETRY_SCHEDULED})

#: States in which no automatic work remains; ``finished_at`` is set exactly here,
#: when the pipeline settles the job. REVIEW_REQUIRED is settled but not final: a
#: review decision moves it on and keeps ``finished_at`` (its own time is
#: ``review_decisions.created_at``).
SETTLED: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.REVIEW_REQUIRED, JobState.FAILED_TERMINAL, JobState.CANCELLED}
)

#: States a cancellation may move to CANCELLED.
CANCELLABLE: frozenset[JobState] = frozenset(
    {JobState.READY, JobState.RETRY_SCHEDULED, JobState.RUNNING}
)

#: States no automatic step leaves (a status stream ends there). FAILED_TERMINAL is
#: left only by an operator re-drive, which a client sees as a new state event.
FINAL: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED_TERMINAL, JobState.CANCELLED}
)


def can_transition(src: JobState, dst: JobState) -> bool:
    """Return whether the state machine allows ``src`` → ``dst``."""
    return (src, dst) in TRANSITIONS
