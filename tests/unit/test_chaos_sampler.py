"""The chaos harness's timeline sampler outlives a database that does not answer.

A private server's restart refuses connections for seconds; the sampler used to
let that error end its task, and awaiting the task after the run then raised it
and lost the whole run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from benchmarks.chaos.oracle import ClientLog
from benchmarks.chaos.run import _drain, _sample

ROW = {"settled": 1, "deliveries_open": 0, "unpublished": 0}


class FlakyPool:
    """A pool whose first ``failures`` acquisitions fail as a restarting server's do."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionRefusedError(111, "Connection refused")

        async def fetchrow(_sql: str) -> dict[str, int]:
            return ROW

        yield SimpleNamespace(fetchrow=fetchrow)


async def test_the_sampler_skips_samples_while_the_database_is_down() -> None:
    stack: Any = SimpleNamespace(pool=FlakyPool(failures=2))
    samples: list[dict[str, float]] = []
    task = asyncio.create_task(_sample(stack, 0.0, ClientLog(), samples))
    await asyncio.sleep(1.8)  # one sample every 0.5 s: two refused, then rows
    assert not task.done(), task.exception()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert stack.pool.calls >= 3 and len(samples) == stack.pool.calls - 2
    assert samples[0]["settled"] == 1


async def test_the_drain_waits_through_a_refused_connection() -> None:
    stack: Any = SimpleNamespace(pool=FlakyPool(failures=1))
    clients = ClientLog()
    clients.accept("job", 0.0)
    assert await _drain(stack, clients, timeout=5)
