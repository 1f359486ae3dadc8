"""Retry policy and Retry-After normalisation (issue 2)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.retry import MAX_RETRY_AFTER_SECONDS, NEVER, RetryPolicy, parse_retry_after

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("-1", None),
        ("abc", None),
        ("1e9", None),
        ("", None),
        (None, None),
        (" 12 ", 12.0),
        ("1.5", 1.5),
        (format_datetime(NOW - timedelta(seconds=30), usegmt=True), None),  # past date
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),  # future date
        ("Sun, 06 Nov 1994 08:49:37 GMT", None),
        ("Wed, 32 Foo 2026 99:99:99 GMT", None),
        # A valid delay beyond the ceiling is held at the ceiling, never dropped.
        (str(int(MAX_RETRY_AFTER_SECONDS)), MAX_RETRY_AFTER_SECONDS),
        (str(int(MAX_RETRY_AFTER_SECONDS) + 1), MAX_RETRY_AFTER_SECONDS),
        ("9" * 40, MAX_RETRY_AFTER_SECONDS),
        ("9" * 400, MAX_RETRY_AFTER_SECONDS),  # float() overflows to inf
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER_SECONDS),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_backoff_cap_doubles_and_caps() -> None:
    p = RetryPolicy(base_seconds=2, cap_seconds=60)
    assert [p.backoff_cap(a) for a in (1, 2, 3, 4, 5, 6, 7, 50)] == [2, 4, 8, 16, 32, 60, 60, 60]


def test_attempts_exhausted() -> None:
    d = RetryPolicy(max_attempts=5).decide(now=NOW, attempt=5, deadline=NOW + timedelta(hours=1))
    assert (d.retry, d.terminal_reason) == (False, "attempts_exhausted")


def test_deadline_margin_leaves_room_for_a_full_attempt() -> None:
    p = RetryPolicy(next_attempt_margin_seconds=50, base_seconds=2, cap_seconds=2)
    assert p.decide(now=NOW, attempt=1, deadline=NOW + timedelta(seconds=51)).terminal_reason in (
        None,
        "deadline_exceeded",
    )
    d = p.decide(now=NOW, attempt=1, deadline=NOW + timedelta(seconds=50))
    assert d.terminal_reason == "deadline_exceeded"


def test_retry_after_is_never_shortened() -> None:
    p = RetryPolicy(base_seconds=2, cap_seconds=4)
    d = p.decide(now=NOW, attempt=1, deadline=NOW + timedelta(hours=1), retry_after=300)
    assert d.retry_at == NOW + timedelta(seconds=300)


def test_retry_after_beyond_deadline_terminal_or_deferred() -> None:
    deadline = NOW + timedelta(seconds=200)
    term = RetryPolicy().decide(now=NOW, attempt=1, deadline=deadline, retry_after=500)
    assert term.terminal_reason == "provider_delay_beyond_deadline"
    defer = RetryPolicy(beyond_deadline="defer").decide(
        now=NOW, attempt=1, deadline=deadline, retry_after=500
    )
    assert defer.retry_at == NOW + timedelta(seconds=500)


@pytest.mark.parametrize("header", ["315360001", "9" * 40, "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_huge_retry_after_is_beyond_every_deadline_never_sooner(header: str) -> None:
    hint = parse_retry_after(header, NOW)
    assert hint is not None
    # Even a deadline further away than the ceiling: the hint is not shortened to fit.
    far = NOW + timedelta(seconds=MAX_RETRY_AFTER_SECONDS * 2)
    for deadline in (NOW + timedelta(hours=1), far):
        term = RetryPolicy().decide(now=NOW, attempt=1, deadline=deadline, retry_after=hint)
        assert (term.retry_at, term.terminal_reason) == (None, "provider_delay_beyond_deadline")
        defer = RetryPolicy(beyond_deadline="defer").decide(
            now=NOW, attempt=1, deadline=deadline, retry_after=hint
        )
        assert (defer.retry_at, defer.terminal_reason) == (NEVER, None)


@settings(max_examples=300, deadline=None)
@given(attempt=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_full_jitter_stays_within_cap(attempt: int, seed: int) -> None:
    p = RetryPolicy(base_seconds=2, cap_seconds=60, max_attempts=5, next_attempt_margin_seconds=0)
    d = p.decide(
        now=NOW, attempt=attempt, deadline=NOW + timedelta(days=1), rng=random.Random(seed)
    )
    assert d.retry_at is not None
    assert NOW <= d.retry_at <= NOW + timedelta(seconds=p.backoff_cap(attempt))


def test_full_jitter_spreads_delays() -> None:
    p = RetryPolicy(base_seconds=2, cap_seconds=60)
    rng = random.Random(7)
    delays = [
        p.decide(now=NOW, attempt=4, deadline=NOW + timedelta(days=1), rng=rng).delay_seconds
        for _ in range(500)
    ]
    assert min(delays) < 2 and max(delays) > 14  # uniform over [0, 16], not fixed backoff
