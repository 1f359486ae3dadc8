"""The console's sign-in limiter (issue 18): sliding windows per address and per key,
with bounded memory."""

from __future__ import annotations

import pytest

from pipeline.api.login_limit import LoginLimiter, LoginLimits, SlidingWindow


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_failures_per_address_block_until_the_window_slides() -> None:
    clock = Clock()
    lim = LoginLimiter(LoginLimits(failures_per_address=3, window_seconds=60), clock)
    for i in range(3):
        assert lim.retry_after("10.0.0.1", f"k{i}") is None
        lim.attempted("10.0.0.1", f"k{i}", failed=True)
        clock.t += 10
    assert lim.retry_after("10.0.0.1", "fresh") == 30  # at 1030; the first leaves at 1060
    assert lim.retry_after("10.0.0.2", "fresh") is None  # another address is not affected
    clock.t = 1060.0
    assert lim.retry_after("10.0.0.1", "fresh") is None


def test_successes_do_not_count_per_address_but_every_attempt_counts_per_key() -> None:
    clock = Clock()
    lim = LoginLimiter(LoginLimits(failures_per_address=2, attempts_per_key=3), clock)
    for _ in range(3):
        assert lim.retry_after("10.0.0.1", "key-a") is None
        lim.attempted("10.0.0.1", "key-a", failed=False)
    assert lim.retry_after("10.0.0.1", "key-b") is None  # the address is fine
    assert lim.retry_after("10.0.0.9", "key-a") == 300  # the key is not, from anywhere


def test_memory_stays_bounded_and_forgets_the_longest_idle_subject() -> None:
    clock = Clock()
    window = SlidingWindow(limit=2, window_seconds=60, max_subjects=100, clock=clock)
    for i in range(1000):
        window.record(f"addr-{i}")
        window.record(f"addr-{i}")
    assert len(window) == 100
    assert window.retry_after("addr-999") is not None
    assert window.retry_after("addr-0") is None  # forgotten first
    window.record("x")
    for _ in range(5):
        window.record("x")
    assert len(window._events["x"]) == 2  # at most `limit` timestamps per subject


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SlidingWindow(limit=0, window_seconds=1, max_subjects=1)
