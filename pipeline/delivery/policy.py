"""Delivery policy: the pure decisions of the dispatcher, kept apart so they are
unit-tested without a database or a network.

* :class:`DeliveryConfig` — timeouts, lease, concurrency, the retry schedule
  (full jitter: the delay after attempt *n* is uniform in ``[0, schedule[n]]``,
  the last value repeating, never sooner than a ``Retry-After``), the retry
  horizon, and the breaker's threshold and cooldowns.
* :func:`classify` — what one HTTP outcome means for the delivery (delivered,
  retry, failed, gone) and for the endpoint's breaker (success, failure, neutral).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.delivery.egress_client import HttpOutcome
from pipeline.identity import DUPLICATE_INVOICE
from pipeline.retry import parse_retry_after
from pipeline.settings import Settings


@dataclass(frozen=True)
class DeliveryConfig:
    """The dispatcher's validated knobs; :meth:`from_settings` maps ``FENCELINE_DELIVERY_*``."""

    timeout_seconds: float = 10.0
    lease_seconds: float = 60.0
    per_endpoint_concurrency: int = 4
    max_in_flight: int = 32
    schedule_seconds: tuple[float, ...] = (5, 60, 300, 1800, 7200, 18000, 36000, 86400)
    max_age_seconds: float = 3 * 86400.0
    breaker_threshold: int = 5
    breaker_cooldown_seconds: float = 60.0
    breaker_cooldown_cap_seconds: float = 3600.0
    auth_alert_after: int = 3
    disable_after_seconds: float = 5 * 86400.0
    poll_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.lease_seconds < self.timeout_seconds + 5:
            raise ValueError("delivery lease must exceed the timeout by at least 5 s")
        if not self.schedule_seconds or any(s < 0 for s in self.schedule_seconds):
            raise ValueError("the retry schedule needs non-negative delays")
        if min(self.per_endpoint_concurrency, self.max_in_flight, self.breaker_threshold) < 1:
            raise ValueError("concurrency and breaker threshold must be at least 1")
        if self.breaker_cooldown_cap_seconds < self.breaker_cooldown_seconds:
            raise ValueError("breaker cooldown cap is below the cooldown")

    @classmethod
    def from_settings(cls, s: Settings) -> DeliveryConfig:
        return cls(
            timeout_seconds=s.delivery_timeout_seconds,
            lease_seconds=s.delivery_lease_seconds,
            per_endpoint_concurrency=s.delivery_per_endpoint_concurrency,
            max_in_flight=s.delivery_max_in_flight,
            schedule_seconds=tuple(s.delivery_schedule_seconds),
            max_age_seconds=s.delivery_max_age_seconds,
            breaker_threshold=s.delivery_breaker_threshold,
            breaker_cooldown_seconds=s.delivery_breaker_cooldown_seconds,
            breaker_cooldown_cap_seconds=s.delivery_breaker_cooldown_cap_seconds,
            auth_alert_after=s.delivery_auth_alert_after,
            disable_after_seconds=s.delivery_disable_after_seconds,
            poll_seconds=s.delivery_poll_seconds,
        )

    def retry_cap(self, attempt: int) -> float:
        """Upper bound of the delay after attempt ``attempt`` (1-based; last value repeats)."""
        return float(self.schedule_seconds[min(max(attempt, 1), len(self.schedule_seconds)) - 1])

    def retry_delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Full jitter over the schedule, never sooner than the endpoint's Retry-After."""
        delay = rng.uniform(0.0, self.retry_cap(attempt))
        return max(delay, retry_after) if retry_after is not None else delay

    def breaker_cooldown(self, consecutive_failures: int) -> float:
        """How long the breaker stays open after ``consecutive_failures`` (≥ threshold)."""
        exp = min(max(consecutive_failures - self.breaker_threshold, 0), 30)
        return float(min(self.breaker_cooldown_cap_seconds, self.breaker_cooldown_seconds * 2**exp))


@dataclass(frozen=True)
class Verdict:
    """What an HTTP outcome means for the delivery and for the endpoint's breaker."""

    kind: str  # delivered | retry | failed | gone
    breaker: str  # success | failure | neutral
    error_class: str | None = None
    error: str | None = None
    retry_after: float | None = None
    auth: bool = False


def classify(outcome: HttpOutcome, now: datetime) -> Verdict:
    """Map one response (or its absence) to a delivery decision; pure.

    2xx delivered; 410 gone (disable the endpoint); 3xx a failure (never followed);
    401/403 retried and counted for the auth alert; 408, 429, 5xx, timeouts and
    transport errors retried (429/503 honour Retry-After); other 4xx failed, a 409
    whose body says ``{"result": "duplicate_invoice"}`` with that error class (the
    ERP refused a second posting of a supplier invoice; retrying cannot change it).
    """
    s = outcome.status
    if s is None:
        return Verdict("retry", "failure", outcome.error_class or "transport", outcome.error)
    if 200 <= s < 300:
        return Verdict("delivered", "success")
    if s == 410:
        return Verdict("gone", "neutral", "gone", "endpoint answered 410 Gone")
    if 300 <= s < 400:
        where = (outcome.location or "")[:200]
        return Verdict("retry", "failure", "redirect", f"HTTP {s} to {where!r} not followed")
    if s in (401, 403):
        return Verdict("retry", "failure", "auth", f"HTTP {s}", auth=True)
    if s in (408, 429) or s >= 500:
        hint = parse_retry_after(outcome.retry_after, now) if s in (429, 503) else None
        return Verdict("retry", "failure", f"http_{s}", f"HTTP {s}", retry_after=hint)
    if s == 409 and _answer(outcome.body_excerpt).get("result") == DUPLICATE_INVOICE:
        posted = _answer(outcome.body_excerpt).get("posted_job_id")
        detail = f"HTTP 409: the ERP already posted this supplier invoice for job {posted}"
        return Verdict("failed", "neutral", DUPLICATE_INVOICE, detail)
    if 400 <= s < 500:
        return Verdict("failed", "neutral", "rejected", f"HTTP {s}")
    return Verdict("retry", "failure", f"http_{s}", f"unexpected HTTP {s}")


def _answer(body: bytes) -> dict[str, Any]:
    """A receiver's JSON answer, or {} for anything else."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
