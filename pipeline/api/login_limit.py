"""Rate limit of the console's sign-in form: guessing keys costs time.

An API key is 32 random bytes, so guessing one is hopeless; the limit keeps the
login form from being a cheap oracle or a way to load the database, and bounds how
fast one key, stolen, can open sessions. Three sliding windows:

* **failures per client address** (default 50 in 5 minutes): failed sign-ins
  (unknown, revoked or expired key) from one address, whatever key they tried. The
  bound on guessing from one address; high, because many reviewers may share one
  address (a company proxy or NAT). A success does not count.
* **failures per address and key tried** (default 5): failed sign-ins from one
  address with one key, known by its first 8 characters (``flk_`` and 4 more: what
  stays the same when a person retries a mistyped, revoked or expired key). One
  person retrying their key is stopped here, after 5 of the address's 50, so
  another reviewer behind the same address signs in with their own key untouched
  (issue 45, defect 5: one person locked out every reviewer of a shared proxy).
  Only a client varying the key it tries (a guesser) reaches the address's budget.
* **attempts per key** (default 20): every sign-in with one exact key, known by its
  digest, from any address, successful or not: how fast a stolen key opens sessions.

A refused (429) attempt is not counted, so a throttled subject cannot keep
another's window full by retrying.

The address is the client's as :mod:`pipeline.api.client_origin` finds it: the
connection's peer, or the address a *trusted* proxy forwards
(``Settings.trusted_proxies``). ``X-Forwarded-For`` from any other peer is the
caller's to choose, so it is never read.

Memory is bounded: at most ``max_subjects`` subjects are tracked per window, each
with at most ``limit`` timestamps; when full, the subject idle longest is forgotten
first (it is the one whose window is most likely over). The limit is per process:
with N intake replicas a client may make up to N × the limit, which is still a bound.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class LoginLimits:
    """Failures per address, failures per address and key tried, and attempts per key
    allowed in ``window_seconds``."""

    failures_per_address: int = 50
    failures_per_address_key: int = 5
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

    #: Characters of a presented key that name "the key tried" per address.
    KEY_TRIED_CHARS = 8

    def __init__(
        self, limits: LoginLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or LoginLimits()
        window, cap = self.limits.window_seconds, self.limits.max_subjects
        self._addresses = SlidingWindow(self.limits.failures_per_address, window, cap, clock)
        self._tried = SlidingWindow(self.limits.failures_per_address_key, window, cap, clock)
        self._keys = SlidingWindow(self.limits.attempts_per_key, window, cap, clock)

    @classmethod
    def key_tried(cls, address: str, presented: str) -> str:
        """The subject of failures per address and key tried."""
        return f"{address}\x00{presented[: cls.KEY_TRIED_CHARS]}"

    def retry_after(self, address: str, presented: str, key_digest: str | None) -> int | None:
        """Whole seconds (at least 1) until this sign-in may be tried, or None: allowed.

        Args:
            address: the client's address.
            presented: the key as typed (only its first characters are kept).
            key_digest: the exact key's digest, None when nothing was typed.
        """
        waits = [
            self._addresses.retry_after(address),
            self._tried.retry_after(self.key_tried(address, presented)),
        ]
        if key_digest is not None:
            waits.append(self._keys.retry_after(key_digest))
        longest = max((w for w in waits if w is not None), default=None)
        return None if longest is None else max(1, math.ceil(longest))

    def attempted(
        self, address: str, presented: str, key_digest: str | None, *, failed: bool
    ) -> None:
        """Count one sign-in attempt that was let through."""
        if key_digest is not None:
            self._keys.record(key_digest)
        if failed:
            self._addresses.record(address)
            self._tried.record(self.key_tried(address, presented))

    def tracked(self) -> int:
        """Subjects held in memory (all windows)."""
        return len(self._addresses) + len(self._tried) + len(self._keys)
