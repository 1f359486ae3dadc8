"""DLQ retention: archived dead letters older than the configured age are purged.

"Without retention ... a DLQ is just an invisible archive" (spec, section 4).
The archive keeps references, not invoices, but it still grows without bound;
:class:`DeadLetterRetention` deletes letters archived before ``now - retention``
together with their replay audit rows, in bounded batches. The job itself keeps
its authoritative record (state, attempts, events), so nothing an operator needs
to explain a job is lost. The maintenance actor runs it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.periodic import PeriodicPass
from pipeline.queries import q
from pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionConfig:
    """How old a dead letter may grow, how often and how much to purge per pass."""

    retention_seconds: float
    interval_seconds: float = 3600.0
    batch: int = 500

    def __post_init__(self) -> None:
        if self.retention_seconds <= 0 or self.interval_seconds <= 0 or self.batch <= 0:
            raise ValueError("retention, interval and batch must be positive")

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionConfig:
        return cls(
            retention_seconds=settings.dlq_retention_days * 86400.0,
            interval_seconds=settings.dlq_purge_interval_seconds,
        )


class DeadLetterRetention(PeriodicPass):
    """start()/stop() around a periodic :meth:`run_once`."""

    pass_name = "dlq retention pass"

    def __init__(
        self, pool: asyncpg.Pool, config: RetentionConfig, *, clock: Clock | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self.clock = clock or DatabaseClock()
        self.purged = 0

    async def run_once(self) -> int:
        """Purge every letter past retention, a batch at a time; return how many."""
        now = self.clock.now() or datetime.now(UTC)
        cutoff = now - timedelta(seconds=self.config.retention_seconds)
        total = 0
        while True:
            async with self.pool.acquire() as conn:
                rows = await conn.fetch(
                    q("dead_letter_purge_archived_before"), cutoff, self.config.batch
                )
            total += len(rows)
            if len(rows) < self.config.batch:
                break
        if total:
            log.info("dlq retention: purged %d dead letters archived before %s", total, cutoff)
        self.purged += total
        return total

    def pass_interval(self) -> float:
        return self.config.interval_seconds
