"""Injectable time.

Queries take ``coalesce($now, now())``: the production clock returns ``None`` so
PostgreSQL's own ``now()`` is the single time source across machines; tests pass
a :class:`ManualClock` to move time without sleeping.

A time a client names (a list cursor, a re-drive window) is read by
:func:`parse_instant` alone: with its offset, and moved to UTC at once, so an instant
that leaves the calendar there (``9999-12-31T23:00-05:00``) is refused as input
rather than overflowing when the database driver converts it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


def parse_instant(text: str) -> datetime:
    """An ISO 8601 / RFC 3339 date-time with its UTC offset, as a UTC datetime.

    Raises:
        ValueError: not a date-time, no offset (a naive time names no instant), or an
            instant outside years 1-9999 once moved to UTC.
    """
    if not isinstance(text, str):
        raise ValueError("expected an RFC 3339 date-time string")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError("a date-time needs its UTC offset")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError("the date-time lies outside years 1-9999 in UTC") from None


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
