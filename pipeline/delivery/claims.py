"""A delivery a dispatcher owns under its fence, and what one dispatch round did."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Claim:
    """One in-flight delivery owned by this dispatcher under ``fence``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    endpoint_id: uuid.UUID
    job_id: uuid.UUID
    event_type: str
    body: bytes
    body_sha256: str
    attempt: int
    fence: int
    lease_until: datetime
    url: str
    #: The job's trace (pipeline/tracing.py); each attempt is a span in it.
    traceparent: str | None = None
    #: The endpoint's breaker when claimed: ``closed``, or ``half_open`` (a probe).
    endpoint_state: str = "closed"


@dataclass
class DispatchReport:
    claimed: int = 0
    reaped: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return self.outcomes.get(outcome, 0)
