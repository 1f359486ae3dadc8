"""A pass repeated every interval in one task until stopped (the reaper, DLQ retention,
spend reconciliation): one loop, so a failed pass is handled the same everywhere."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pipeline.waiting import wait_within

log = logging.getLogger(__name__)


class PeriodicPass:
    """Runs :meth:`run_once` every :meth:`pass_interval` seconds between :meth:`start`
    and :meth:`stop`. A failed pass is logged and the next one runs: nothing but
    ``stop()`` ends the loop (the outbox relay once died silently on an error its
    loop did not expect, issue 17)."""

    #: The task's name and the log's word for a pass.
    pass_name = "periodic pass"
    _task: asyncio.Task[None] | None = None
    _stopping: asyncio.Event | None = None

    async def run_once(self) -> Any:
        raise NotImplementedError

    def pass_interval(self) -> float:
        raise NotImplementedError

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"{self.pass_name} already started")
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._run(self._stopping), name=self.pass_name)

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.run_once()
            except Exception:  # a transient database error must not end the loop
                log.exception(
                    "%s failed; the next runs in %.1fs", self.pass_name, self.pass_interval()
                )
            try:
                await wait_within(stopping.wait(), self.pass_interval())
            except TimeoutError:
                continue
