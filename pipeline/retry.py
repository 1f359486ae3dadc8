"""Persisted retry decisions: full jitter, a cap, max attempts, deadline margin, Retry-After.

The policy is pure: the job store calls :meth:`RetryPolicy.decide` inside the
transaction that persists the outcome, with the database's time, so a restart
never resets the attempt counter and nothing sleeps while holding a connection.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal

_DELTA_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
#: The longest provider delay kept as given (about 10 years, far beyond any job
#: deadline or delivery horizon). A longer valid value is read as exactly this,
#: which :meth:`RetryPolicy.decide` takes as "beyond every deadline": never sooner.
MAX_RETRY_AFTER_SECONDS = 10 * 365 * 86400.0
#: ``retry_at`` of a deferred retry whose provider delay is beyond any date we schedule.
#: Not ``datetime.max``: asyncpg stores that as PostgreSQL's ``infinity`` and reads
#: it back as a naive datetime, which no aware timestamp compares with.
NEVER = datetime(9999, 12, 31, tzinfo=UTC)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Normalise a ``Retry-After`` value to seconds from ``now``.

    Accepts delta-seconds (``"7"``, ``"0"``, also fractional ``"1.5"``) and an
    HTTP-date. Returns None for a missing, malformed (``"abc"``, ``"1e9"``),
    negative or past value: the caller then uses its own backoff. A valid delay
    longer than :data:`MAX_RETRY_AFTER_SECONDS` returns that ceiling, never less,
    so a huge hint still means "not before then" rather than "no hint".
    """
    if value is None:
        return None
    m = _DELTA_SECONDS.match(value)
    if m:
        return min(float(m.group(1)), MAX_RETRY_AFTER_SECONDS)
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - now).total_seconds()
    return min(delta, MAX_RETRY_AFTER_SECONDS) if delta > 0 else None


@dataclass(frozen=True)
class RetryDecision:
    """Either ``retry_at`` (schedule another attempt) or ``terminal_reason``."""

    retry_at: datetime | None
    terminal_reason: str | None
    delay_seconds: float = 0.0

    @property
    def retry(self) -> bool:
        return self.retry_at is not None


@dataclass(frozen=True)
class RetryPolicy:
    """The spec's retry sketch, production grade.

    Attributes:
        max_attempts: attempts per job, all layers together (SDK retries are off).
        base_seconds / cap_seconds: backoff ``min(cap, base * 2**(attempt-1))``,
            drawn uniformly from ``[0, that]`` (full jitter).
        next_attempt_margin_seconds: a retry must leave this much time before the
            deadline for a full attempt and its commit.
        beyond_deadline: what to do when the provider's delay hint leaves no room
            before the deadline: ``"terminal"`` fails now; ``"defer"`` schedules at
            the hint anyway (never sooner) and lets the deadline decide. A hint at
            :data:`MAX_RETRY_AFTER_SECONDS` counts as beyond every deadline; deferred,
            it schedules at :data:`NEVER`.
    """

    max_attempts: int = 5
    base_seconds: float = 2.0
    cap_seconds: float = 60.0
    next_attempt_margin_seconds: float = 50.0
    beyond_deadline: Literal["terminal", "defer"] = "terminal"

    def backoff_cap(self, attempt: int) -> float:
        exp = min(max(attempt - 1, 0), 62)
        return float(min(self.cap_seconds, self.base_seconds * (2.0**exp)))

    def decide(
        self,
        *,
        now: datetime,
        attempt: int,
        deadline: datetime,
        retry_after: float | None = None,
        max_attempts: int | None = None,
        rng: random.Random | None = None,
    ) -> RetryDecision:
        """Decide what follows failed attempt number ``attempt`` (1-based)."""
        limit = max_attempts if max_attempts is not None else self.max_attempts
        if attempt >= limit:
            return RetryDecision(None, "attempts_exhausted")
        r = rng or random
        delay = r.uniform(0.0, self.backoff_cap(attempt))
        hinted = retry_after is not None and retry_after >= delay
        forever = retry_after is not None and retry_after >= MAX_RETRY_AFTER_SECONDS
        if retry_after is not None:
            delay = max(delay, retry_after)
        when = now + timedelta(seconds=delay)
        margin = timedelta(seconds=self.next_attempt_margin_seconds)
        if forever or when + margin >= deadline:
            if hinted and self.beyond_deadline == "defer":
                return RetryDecision(NEVER if forever else when, None, delay)
            reason = "provider_delay_beyond_deadline" if hinted else "deadline_exceeded"
            return RetryDecision(None, reason, delay)
        return RetryDecision(when, None, delay)
