"""Rate limit of the console's sign-in form: guessing keys costs time.

An API key is 32 random bytes, so guessing one is hopeless; the limit keeps the
login form from being a cheap oracle or a way to load the database, and bounds how
fast one key, stolen, can open sessions. Two sliding windows, one per kind of
subject:

* **per client address**: failed sign-ins (unknown, revoked or expired key). A
  success does not count, so reviewers behind one NAT address are not locked out
  by each other's sign-ins, only by failures.
* **per key**: every sign-in attempt with one key, known by its digest (the same
  identity as its key id, known before the database is asked), successful or not.

The address is the connection's peer (``request.client``): a forwarded-for header
is the caller's to choose, so it is never read.

Memory is bounded: at most ``max_subjects`` subjects are tracked, each with at most
``limit`` timestamps; when full, the subject idle longest is forgotten first (it
is the one whose window is most likely over). The limit is per process: with N
intake replicas a client may make up to N × the limit, which is still a bound.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class LoginLimits:
    """Failures per address and attempts per key allowed in ``window_seconds``."""

    failures_per_address: int = 10
    attempts_per_key: int = 20
    window_seconds: float = 300.0
    max_subjects: int = 10_000


class SlidingWindow:
    """Events per subject in a sliding window, for a bounded number of subjects."""

    def __init__(
        self,
        limit: int,
        window_seconds: float,
        max_subjects: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window_seconds <= 0 or max_subjects < 1:
            raise ValueError("limit, window and max_subjects must be positive")
        self.limit = limit
        self.window = window_seconds
        self.max_subjects = max_subjects
        self._clock = clock
        self._events: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._events)

    def _recent(self, subject: str, now: float) -> deque[float] | None:
        events = self._events.get(subject)
        if events is None:
            return None
        while events and events[0] <= now - self.window:
            events.popleft()
        if not events:
            del self._events[subject]
            return None
        return events

    def retry_after(self, subject: str) -> float | None:
        """Seconds until ``subject`` may act again, or None when it may now."""
        now = self._clock()
        events = self._recent(subject, now)
        if events is None or len(events) < self.limit:
            return None
        return events[0] + self.window - now

    def record(self, subject: str) -> None:
        """Count one event of ``subject`` now (keeping only the last ``limit``)."""
        now = self._clock()
        events = self._recent(subject, now)
        if events is None:
            while len(self._events) >= self.max_subjects:
                self._events.popitem(last=False)
            events = self._events[subject] = deque(maxlen=self.limit)
        events.append(now)
        self._events.move_to_end(subject)


class LoginLimiter:
    """The console's sign-in limits (see the module docstring)."""

    def __init__(
        self, limits: LoginLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or LoginLimits()
        window, cap = self.limits.window_seconds, self.limits.max_subjects
        self._addresses = SlidingWindow(self.limits.failures_per_address, window, cap, clock)
        self._keys = SlidingWindow(self.limits.attempts_per_key, window, cap, clock)

    def retry_after(self, address: str, key_digest: str | None) -> int | None:
        """Whole seconds (at least 1) until this sign-in may be tried, or None: allowed."""
        waits = [self._addresses.retry_after(address)]
        if key_digest is not None:
            waits.append(self._keys.retry_after(key_digest))
        longest = max((w for w in waits if w is not None), default=None)
        return None if longest is None else max(1, math.ceil(longest))

    def attempted(self, address: str, key_digest: str | None, *, failed: bool) -> None:
        """Count one sign-in attempt that was let through."""
        if key_digest is not None:
            self._keys.record(key_digest)
        if failed:
            self._addresses.record(address)

    def tracked(self) -> int:
        """Subjects held in memory (both windows)."""
        return len(self._addresses) + len(self._keys)
