"""What an admission policy holds: queued tickets, each grant's charge in the
sliding window, the open grants, and the snapshot it reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.admission.grants import (
    Grant,
    PriorityClass,
)


@dataclass
class Ticket:
    """A queued request; ``grant`` is set when :meth:`AdmissionPolicy.dispatch` grants it."""

    id: int
    tenant: str
    priority: PriorityClass
    prompt_tokens: int
    max_output_tokens: int
    submitted_at: float
    job_id: str | None = None
    fence: int | None = None
    grant: Grant | None = None
    holder: str | None = None
    holder_run: str | None = None
    #: Asks of the same kind its holder holds behind this one (reported, never charged).
    backlog: int = 0

    @property
    def cost(self) -> int:
        return self.prompt_tokens + self.max_output_tokens


@dataclass
class AdmissionSnapshot:
    """Point-in-time state of a scope, for operators and tests."""

    scope: str
    in_flight: int
    in_flight_tokens: int
    tenant_in_flight: dict[str, int]
    queued: dict[str, int]
    window_requests: int
    window_tokens: int
    cooldown_remaining: float
    granted_total: int
    expired_total: int
    cooldowns_total: int
    refunded_tokens_total: int
    limits: dict[str, Any] = field(default_factory=dict)
    #: The queued tickets' backlogs: asks in their holders' hands behind them.
    queued_backlog: int = 0
    #: Charged tokens of the last day (0 without TPD).
    day_tokens: int = 0


@dataclass(eq=False)  # identity: equal-valued charges are distinct grants
class Charge:
    """One grant's footprint in the sliding window (adjusted on release)."""

    t: float
    requests: int
    tokens: int
    in_window: bool = True
    settled: bool = False


@dataclass
class OpenGrant:
    grant: Grant
    charge: Charge
    deadline: float | None
    #: Its footprint in the day window (TPD), apart from the 60 s one; None without TPD.
    day_charge: Charge | None = None


FlowKey = tuple[str, PriorityClass]
