"""A new intake warms its pool before it serves: the accept path once per connection.

asyncpg prepares a statement, and PostgreSQL plans each statement of the
``intake_accept`` function, once per connection: on a freshly started intake the
first accept on each pool connection paid for both (16 concurrent first accepts
took 259-310 ms there, 102-119 ms with this warm-up; docs/history/benchmarks-passes.md). At
start (:meth:`pipeline.api.context.ApiContext.startup`) each of the
``db_pool_min`` connections runs the accept path as
:meth:`~pipeline.api.intake.IntakeService.submit` does (a throwaway tenant, the
capacity check, ``intake_accept``) in one transaction that is rolled back: nothing
of it is ever visible, its NOTIFYs are never sent, and it records no trace span
or metric.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import asyncpg

from pipeline.api.intake import IntakeService
from pipeline.jobs import AcceptRequest, DocumentIn, demand_for
from pipeline.settings import Settings
from pipeline.tenants import create_tenant

log = logging.getLogger(__name__)


class _RolledBack(Exception):
    """Ends :func:`warm_connection`'s transaction (rolling it back) with its outcome."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


async def warm_connection(intake: IntakeService, conn: asyncpg.Connection) -> str:
    """Run the accept path once on ``conn`` and roll it back; returns its outcome."""
    try:
        async with conn.transaction():
            tenant = await create_tenant(conn, f"intake-warm-up-{uuid.uuid4().hex}")
            req = AcceptRequest(
                tenant_id=tenant.id,
                idempotency_key="intake-warm-up",
                document=DocumentIn(content="warm-up"),
            )
            demand = demand_for(len(req.document.raw), intake.settings)
            _, check = await intake.admission_check(conn, None, demand)
            raise _RolledBack(await intake.store.warm_accept(req, check, conn=conn))
    except _RolledBack as done:
        return done.outcome


async def warm_pool(pool: asyncpg.Pool, intake: IntakeService, settings: Settings) -> int:
    """:func:`warm_connection` on each of the ``db_pool_min`` connections the intake
    opened, at once. Returns how many were warmed; a database that is down or not
    migrated is logged and skipped (requests then answer 503, as without a warm-up)."""
    n: int = min(settings.db_pool_min, settings.db_pool_max, int(pool.get_size()))
    if n <= 0:
        return 0
    started = time.perf_counter()

    async def one() -> str:
        async with pool.acquire(timeout=settings.db_acquire_timeout_seconds) as conn:
            return await warm_connection(intake, conn)

    try:
        outcomes = await asyncio.gather(*(one() for _ in range(n)))
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        log.warning("intake warm-up skipped: %r", exc)
        return 0
    log.info(
        "intake: %d pool connection(s) warmed in %.0f ms (%s)",
        n,
        (time.perf_counter() - started) * 1000,
        ", ".join(sorted(set(outcomes))),
    )
    return n
