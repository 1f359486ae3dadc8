"""Injectable time.

Queries take ``coalesce($now, now())``: the production clock returns ``None`` so
PostgreSQL's own ``now()`` is the single time source across machines; tests pass
a :class:`ManualClock` to move time without sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime | None:
        """The time to use in SQL, or None for the database's ``now()``."""
        ...


class DatabaseClock:
    """Defer to the database server's clock."""

    def now(self) -> datetime | None:
        return None


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now
