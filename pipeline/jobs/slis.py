"""The job SLIs as Prometheus series: completion latency, outcomes, backlog, review.

The spec separates three things that a single "queue depth" hides: broker lag
(:mod:`pipeline.messaging.metrics`), the durable runnable backlog with the age
of its oldest eligible job (sampled here from the job table, so it holds with or
without a broker), and extraction completion latency, accept → settled, where
REVIEW_REQUIRED counts as settled (``finished_at``; a reviewer's later decision
never moves it). REVIEW_REQUIRED has its own SLO, so the review queue, its
oldest job's age and the time to a review decision are series of their own.

Observed where the transition commits (:meth:`JobMetrics.settled` is the job
store's last step inside the settle transaction, in whichever process settles:
driver, reaper, API), sampled by :meth:`JobMetrics.sample` in the maintenance
actor. Labels are bounded: tenant, state, reason (an error class or terminal
reason, never free text), decision. Job, attempt and fence ids go to logs and
traces, never here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from pipeline.jobs.records import Settled
from pipeline.queries import q
from pipeline.states import JobState

#: Accept → settled: seconds for the interactive class up to hours for a burst.
COMPLETION_BUCKETS = (1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
#: Review decisions take minutes to days.
REVIEW_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800)

_SETTLED = (
    JobState.SUCCEEDED,
    JobState.REVIEW_REQUIRED,
    JobState.FAILED_TERMINAL,
    JobState.CANCELLED,
)
_REVIEW_REASONS = ("review_approved", "review_rejected")


class JobMetrics:
    """The job SLIs on ``registry`` (the process default when omitted)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.completion_seconds = Histogram(
            "fenceline_job_completion_seconds",
            "Acceptance to settled (SUCCEEDED, REVIEW_REQUIRED, FAILED_TERMINAL or CANCELLED), "
            "by tenant "
            "and state",
            ["tenant", "state"],
            buckets=COMPLETION_BUCKETS,
            registry=r,
        )
        self.outcomes = Counter(
            "fenceline_job_outcomes",
            "Jobs settled by the automated pipeline, by tenant, state and reason",
            ["tenant", "state", "reason"],
            registry=r,
        )
        self.retries = Counter(
            "fenceline_job_retries",
            "Retries persisted (RETRY_SCHEDULED), by tenant and error class",
            ["tenant", "reason"],
            registry=r,
        )
        self.review_decision_seconds = Histogram(
            "fenceline_review_decision_seconds",
            "REVIEW_REQUIRED (settled) to the reviewer's decision, by tenant and decision",
            ["tenant", "decision"],
            buckets=REVIEW_BUCKETS,
            registry=r,
        )
        self.runnable = Gauge(
            "fenceline_jobs_runnable",
            "Durable runnable backlog: jobs due now and not claimed, by tenant",
            ["tenant"],
            registry=r,
        )
        self.running = Gauge(
            "fenceline_jobs_running", "Jobs under a lease, by tenant", ["tenant"], registry=r
        )
        self.oldest_eligible_seconds = Gauge(
            "fenceline_oldest_eligible_job_seconds",
            "Age of the oldest job due and not claimed (0 when none), by tenant",
            ["tenant"],
            registry=r,
        )
        self.review_queue = Gauge(
            "fenceline_review_queue_jobs",
            "Jobs waiting for a review decision, by tenant",
            ["tenant"],
            registry=r,
        )
        self.review_oldest_seconds = Gauge(
            "fenceline_review_oldest_seconds",
            "Age of the oldest job waiting for review since it settled (0 when none), by tenant",
            ["tenant"],
            registry=r,
        )
        self.dead_letters = Gauge(
            "fenceline_dead_letters_waiting",
            "Archived dead letters not replayed",
            registry=r,
        )
        self.dead_letter_oldest_seconds = Gauge(
            "fenceline_dead_letter_oldest_seconds",
            "Age of the oldest archived dead letter not replayed (0 when none)",
            registry=r,
        )
        self._tenants: set[str] = set()

    # ------------------------------------------------------------ transitions
    def settled(self, s: Settled) -> None:
        """Count one committed transition (called inside its transaction)."""
        tenant = str(s.tenant_id)
        if s.reason in _REVIEW_REASONS:
            if s.finished_at is not None and s.decided_at is not None:
                decision = "approve" if s.reason == "review_approved" else "reject"
                seconds = (s.decided_at - s.finished_at).total_seconds()
                self.review_decision_seconds.labels(tenant, decision).observe(max(seconds, 0.0))
            return
        if s.state is JobState.RETRY_SCHEDULED:
            self.retries.labels(tenant, s.reason or "unknown").inc()
            return
        if s.state not in _SETTLED:
            return
        reason = {JobState.SUCCEEDED: "ok", JobState.REVIEW_REQUIRED: "validation"}.get(
            s.state, s.reason or "unknown"
        )
        self.outcomes.labels(tenant, s.state.value, reason).inc()
        if s.created_at is not None and s.finished_at is not None:
            seconds = (s.finished_at - s.created_at).total_seconds()
            self.completion_seconds.labels(tenant, s.state.value).observe(max(seconds, 0.0))

    # --------------------------------------------------------------- sampling
    async def sample(self, conn: asyncpg.Connection, now: datetime | None = None) -> dict[str, Any]:
        """Read the backlog, review and dead-letter gauges from the database."""
        rows = await conn.fetch(q("job_sli_stats"), now)
        seen: set[str] = set()
        for row in rows:
            tenant = str(row["tenant_id"])
            seen.add(tenant)
            self.runnable.labels(tenant).set(row["runnable"])
            self.running.labels(tenant).set(row["running"])
            self.oldest_eligible_seconds.labels(tenant).set(float(row["oldest_eligible_seconds"]))
            self.review_queue.labels(tenant).set(row["review"])
            self.review_oldest_seconds.labels(tenant).set(float(row["oldest_review_seconds"]))
        for tenant in self._tenants - seen:  # nothing waiting any more: zero, not stale
            for gauge in (
                self.runnable,
                self.running,
                self.oldest_eligible_seconds,
                self.review_queue,
                self.review_oldest_seconds,
            ):
                gauge.labels(tenant).set(0)
        self._tenants |= seen
        dlq = await conn.fetchrow(q("dead_letter_backlog_stats"), now)
        self.dead_letters.set(dlq["waiting"])
        self.dead_letter_oldest_seconds.set(float(dlq["oldest_seconds"]))
        return {"tenants": [dict(r.items()) for r in rows], "dead_letters": dict(dlq.items())}


_default: JobMetrics | None = None


def default_job_metrics() -> JobMetrics:
    """The process-wide instance on Prometheus' default registry (created once)."""
    global _default
    if _default is None:
        _default = JobMetrics()
    return _default
