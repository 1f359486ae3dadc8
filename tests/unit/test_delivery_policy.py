"""The dispatcher's pure decisions: response classes, retry schedule, breaker cooldown."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from pipeline.delivery import DeliveryConfig
from pipeline.delivery.egress_client import HttpOutcome
from pipeline.delivery.policy import classify
from pipeline.settings import Settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def outcome(status: int | None, **kw: object) -> HttpOutcome:
    return HttpOutcome(status, 12.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "kind", "breaker", "error_class"),
    [
        (200, "delivered", "success", None),
        (202, "delivered", "success", None),
        (204, "delivered", "success", None),
        (301, "retry", "failure", "redirect"),
        (302, "retry", "failure", "redirect"),
        (307, "retry", "failure", "redirect"),
        (400, "failed", "neutral", "rejected"),
        (404, "failed", "neutral", "rejected"),
        (409, "failed", "neutral", "rejected"),
        (413, "failed", "neutral", "rejected"),
        (401, "retry", "failure", "auth"),
        (403, "retry", "failure", "auth"),
        (408, "retry", "failure", "http_408"),
        (410, "gone", "neutral", "gone"),
        (429, "retry", "failure", "http_429"),
        (500, "retry", "failure", "http_500"),
        (503, "retry", "failure", "http_503"),
    ],
)
def test_status_classes(status: int, kind: str, breaker: str, error_class: str | None) -> None:
    v = classify(outcome(status), NOW)
    assert (v.kind, v.breaker, v.error_class) == (kind, breaker, error_class)
    assert v.auth is (status in (401, 403))


def test_no_response_is_a_retryable_failure_with_its_cause() -> None:
    for cause in ("timeout", "transport", "egress_blocked"):
        v = classify(outcome(None, error_class=cause, error="x"), NOW)
        assert (v.kind, v.breaker, v.error_class) == ("retry", "failure", cause)


def test_retry_after_is_read_for_429_and_503_only() -> None:
    assert classify(outcome(429, retry_after="120"), NOW).retry_after == 120.0
    date = "Mon, 30 Nov 2026 13:00:00 GMT"
    assert classify(outcome(503, retry_after=date), NOW).retry_after == 3600.0
    assert classify(outcome(500, retry_after="120"), NOW).retry_after is None
    assert classify(outcome(429, retry_after="soon"), NOW).retry_after is None


def test_redirect_location_is_reported_not_followed() -> None:
    v = classify(outcome(302, location="http://169.254.169.254/"), NOW)
    assert v.error is not None and "169.254.169.254" in v.error and "not followed" in v.error


def test_full_jitter_stays_within_the_schedule_and_honours_retry_after() -> None:
    cfg = DeliveryConfig(schedule_seconds=(5, 60, 3600))
    rng = random.Random(1)
    for attempt, cap in [(1, 5), (2, 60), (3, 3600), (9, 3600)]:
        delays = [cfg.retry_delay(attempt, None, rng) for _ in range(500)]
        assert 0 <= min(delays) and max(delays) <= cap
        assert max(delays) > cap * 0.9 and min(delays) < cap * 0.1  # spread over the range
    assert all(cfg.retry_delay(1, 900.0, rng) >= 900.0 for _ in range(50))


def test_default_schedule_spans_hours_to_days() -> None:
    cfg = DeliveryConfig.from_settings(Settings())
    assert cfg.retry_cap(1) == 5 and cfg.retry_cap(100) == 86400
    assert sum(cfg.schedule_seconds) > 86400
    assert cfg.max_age_seconds >= 3 * 86400


def test_breaker_cooldown_doubles_up_to_the_cap() -> None:
    cfg = DeliveryConfig(
        breaker_threshold=3, breaker_cooldown_seconds=60, breaker_cooldown_cap_seconds=600
    )
    assert [cfg.breaker_cooldown(n) for n in (3, 4, 5, 6, 7, 1000)] == [
        60,
        120,
        240,
        480,
        600,
        600,
    ]


@pytest.mark.parametrize(
    "kw",
    [
        {"timeout_seconds": 30, "lease_seconds": 30},
        {"schedule_seconds": ()},
        {"schedule_seconds": (5, -1)},
        {"per_endpoint_concurrency": 0},
        {"breaker_cooldown_seconds": 100, "breaker_cooldown_cap_seconds": 10},
    ],
)
def test_invalid_configs_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        DeliveryConfig(**kw)  # type: ignore[arg-type]


def test_a_duplicate_invoice_answer_fails_with_its_own_class_other_409s_are_rejected() -> None:
    now = datetime.now(UTC)
    body = b'{"result": "duplicate_invoice", "posted_job_id": "j-1"}'
    v = classify(HttpOutcome(409, 1.0, body_excerpt=body), now)
    assert (v.kind, v.breaker, v.error_class) == ("failed", "neutral", "duplicate_invoice")
    assert v.error is not None and "j-1" in v.error
    for other in (b'{"result": "conflict"}', b"not json", b"[1]"):
        v = classify(HttpOutcome(409, 1.0, body_excerpt=other), now)
        assert (v.kind, v.error_class) == ("failed", "rejected")
