"""Prometheus metrics of the intake API, on a registry owned by each app.

Acceptance latency and extraction completion latency are separate SLIs (spec
section 1); this module measures the first. Each :func:`pipeline.api.app.create_app`
gets its own :class:`~prometheus_client.CollectorRegistry`, so two apps in one
process (tests, benchmarks) never share or double-register series. Labels are
bounded sets — outcome and refusal reason — never job or tenant ids.

Every ``POST /v1/extraction-jobs`` is observed exactly once, by
:class:`AcceptanceMiddleware`, also when it is refused before the route runs
(401 at authentication, 413 on the declared length, 422 on the query, 503 when
the database is down at authentication): the route classifies what it decides,
and the middleware classifies the rest from the response status and the
problem's ``reason``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


#: The route of the acceptance SLI.
ACCEPT_METHOD, ACCEPT_PATH = "POST", "/v1/extraction-jobs"
#: Where the middleware leaves the request's timer (``request.state``).
TIMER_STATE_KEY = "fenceline_acceptance"
#: Error bodies longer than this are not parsed for a reason (problems are small).
_MAX_PROBLEM_BYTES = 16_384


@dataclass
class AcceptanceTimer:
    """The outcome a request ends with; ``None`` until the route or the middleware sets it."""

    outcome: str | None = None
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


def acceptance_timer(state: Any) -> AcceptanceTimer:
    """The timer :class:`AcceptanceMiddleware` put on this request's ``state``."""
    timer: AcceptanceTimer = getattr(state, TIMER_STATE_KEY)
    return timer


class AcceptanceMiddleware:
    """Observes every ``POST /v1/extraction-jobs`` once, when its response is sent.

    Installed outside the body limit, so refusals that never reach the route
    (authentication, the declared length, query validation, a database that is
    down at authentication) are timed and counted like the route's own.
    """

    def __init__(self, app: ASGIApp, metrics: IntakeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_acceptance(scope):
            await self.app(scope, receive, send)
            return
        timer = AcceptanceTimer()
        scope.setdefault("state", {})[TIMER_STATE_KEY] = timer
        status: int | None = None
        problem = bytearray()

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and status and status >= 400:
                if len(problem) <= _MAX_PROBLEM_BYTES:
                    problem.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            if timer.outcome is None:
                timer.outcome, timer.reason = _classify(status, bytes(problem))
            self.metrics.observe(timer)


def _is_acceptance(scope: Scope) -> bool:
    if scope["type"] != "http" or scope.get("method") != ACCEPT_METHOD:
        return False
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path.rstrip("/") == ACCEPT_PATH


def _classify(status: int | None, body: bytes) -> tuple[str, str | None]:
    """Outcome and reason of a response the route did not classify."""
    if status is None or (status >= 500 and status != 503):
        return "error", None
    reason = _problem_reason(body) or f"http_{status}"
    if status in (429, 503):
        return "rejected", reason
    if status >= 400:
        return "invalid", reason
    return "error", None  # a success the route did not record is a bug, not a success


def _problem_reason(body: bytes) -> str | None:
    try:
        reason = json.loads(body).get("reason")
    except (ValueError, AttributeError):
        return None
    return reason if isinstance(reason, str) and reason.isidentifier() else None
