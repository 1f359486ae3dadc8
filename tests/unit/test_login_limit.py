"""The console's sign-in limiter (issues 18 and 45): sliding windows per address, per
address and key tried, and per key, with bounded memory."""

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
        assert lim.retry_after("10.0.0.1", f"flk_k{i}", f"k{i}") is None
        lim.attempted("10.0.0.1", f"flk_k{i}", f"k{i}", failed=True)
        clock.t += 10
    assert lim.retry_after("10.0.0.1", "flk_new", "fresh") == 30  # the first leaves at 1060
    assert lim.retry_after("10.0.0.2", "flk_new", "fresh") is None  # another address is fine
    clock.t = 1060.0
    assert lim.retry_after("10.0.0.1", "flk_new", "fresh") is None


def test_successes_do_not_count_per_address_but_every_attempt_counts_per_key() -> None:
    clock = Clock()
    lim = LoginLimiter(LoginLimits(failures_per_address=2, attempts_per_key=3), clock)
    for _ in range(3):
        assert lim.retry_after("10.0.0.1", "flk_aaaa", "key-a") is None
        lim.attempted("10.0.0.1", "flk_aaaa", "key-a", failed=False)
    assert lim.retry_after("10.0.0.1", "flk_bbbb", "key-b") is None  # the address is fine
    assert lim.retry_after("10.0.0.9", "flk_aaaa", "key-a") == 300  # the key is not, anywhere


def test_one_persons_failures_with_one_key_leave_the_address_to_others() -> None:
    """Issue 45, defect 5: behind one shared address, one reviewer retrying a wrong key
    is stopped at the per-key budget; another key still signs in until the address's
    own (higher) budget of failures is spent."""
    clock = Clock()
    lim = LoginLimiter(
        LoginLimits(failures_per_address=6, failures_per_address_key=2, window_seconds=60), clock
    )
    proxy = "192.0.2.7"
    for typo in ("flk_AbCdTYPO1", "flk_AbCdTYPO2"):  # one key mistyped: same first 8
        assert lim.retry_after(proxy, typo, typo) is None
        lim.attempted(proxy, typo, typo, failed=True)
    assert lim.retry_after(proxy, "flk_AbCdTYPO3", "typo3") == 60  # that key waits
    assert lim.retry_after(proxy, "flk_ZyXwRIGHT", "right") is None  # another key does not
    assert lim.retry_after("198.51.100.1", "flk_AbCdTYPO3", "typo3") is None  # nor elsewhere
    # A guesser varying the key spends the address's budget, and then everyone waits.
    for i in range(4):
        guess = f"flk_{i:04d}guess"
        assert lim.retry_after(proxy, guess, guess) is None
        lim.attempted(proxy, guess, guess, failed=True)
    assert lim.retry_after(proxy, "flk_ZyXwRIGHT", "right") == 60


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
