"""Prometheus metrics of the intake API, on a registry owned by each app.

Acceptance latency and extraction completion latency are separate SLIs (spec
section 1); this module measures the first. Each :func:`pipeline.api.create_app`
gets its own :class:`~prometheus_client.CollectorRegistry`, so two apps in one
process (tests, benchmarks) never share or double-register series. Labels are
bounded sets — outcome and refusal reason — never job or tenant ids.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.responses import Response

#: Outcomes of one acceptance request (the ``outcome`` label).
OUTCOMES = (
    "accepted",  # 202: a new job committed
    "replayed",  # 200: same key, same request
    "conflict",  # 409: same key, different request
    "rejected",  # 429/503: admission refused before anything was written
    "invalid",  # 4xx: the request was malformed or unauthorised
    "error",  # 5xx: an internal failure (nothing committed)
)

_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


@dataclass
class AcceptanceTimer:
    """Holds the outcome a request ends with; defaults to ``error`` if never set."""

    outcome: str = "error"
    reason: str | None = None
    started: float = field(default_factory=time.perf_counter)


class IntakeMetrics:
    """The intake API's series on a private registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.acceptance_seconds = Histogram(
            "fenceline_acceptance_seconds",
            "Time to answer POST /v1/extraction-jobs, by outcome",
            ["outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.accepted = Counter(
            "fenceline_jobs_accepted",
            "Jobs durably accepted (202, new job committed)",
            registry=self.registry,
        )
        self.replayed = Counter(
            "fenceline_jobs_replayed",
            "Idempotent replays answered with an existing job (200)",
            registry=self.registry,
        )
        self.rejected = Counter(
            "fenceline_jobs_rejected",
            "Acceptance requests refused, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.streams = Gauge(
            "fenceline_status_streams",
            "Open Server-Sent Events status streams",
            registry=self.registry,
        )
        for outcome in OUTCOMES:
            self.acceptance_seconds.labels(outcome)

    @contextmanager
    def acceptance(self) -> Iterator[AcceptanceTimer]:
        """Time one acceptance; the caller sets ``outcome`` (and ``reason`` for refusals)."""
        timer = AcceptanceTimer()
        try:
            yield timer
        finally:
            self.observe(timer)

    def observe(self, timer: AcceptanceTimer) -> None:
        outcome = timer.outcome if timer.outcome in OUTCOMES else "error"
        self.acceptance_seconds.labels(outcome).observe(time.perf_counter() - timer.started)
        if outcome == "accepted":
            self.accepted.inc()
        elif outcome == "replayed":
            self.replayed.inc()
        else:
            self.rejected.labels(timer.reason or outcome).inc()

    def response(self) -> Response:
        """The text exposition of this registry."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
