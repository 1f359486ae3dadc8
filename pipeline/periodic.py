"""A pass repeated every interval in one task until stopped (the reaper, DLQ retention,
spend reconciliation, the driver autoscaler): one loop, so a failed pass is handled
the same everywhere, and the base of the :class:`~pipeline.service.Service` shape."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pipeline.service import LoopProgress, LoopService
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)


class PeriodicPass(LoopService):
    """Runs :meth:`run_once` every :meth:`pass_interval` seconds between :meth:`start`
    and :meth:`stop`. A failed pass is logged and the next one runs: nothing but
    ``stop()`` ends the loop (the outbox relay once died silently on an error its
    loop did not expect, issue 17). Each pass the loop runs is counted
    (:attr:`progress`), and :meth:`health` reports it; a pass a test calls directly
    through :meth:`run_once` is not the loop's and is not counted.
    """

    #: The task's name and the log's word for a pass.
    pass_name = "periodic pass"
    _stopping: asyncio.Event | None = None

    async def run_once(self) -> Any:
        raise NotImplementedError

    def pass_interval(self) -> float:
        raise NotImplementedError

    def health_name(self) -> str:
        return self.pass_name

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"{self.pass_name} already started")
        self._stopping = asyncio.Event()
        self._progress = progress = LoopProgress.begin()
        self._task = asyncio.create_task(self._run(self._stopping, progress), name=self.pass_name)

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self, stopping: asyncio.Event, progress: LoopProgress) -> None:
        while not stopping.is_set():
            try:
                await self.run_once()
            except Exception as exc:  # a transient database error must not end the loop
                progress.failed(exc)
                log.exception(
                    "%s failed; the next runs in %.1fs", self.pass_name, self.pass_interval()
                )
            else:
                progress.succeeded()
            try:
                await wait_within(stopping.wait(), self.pass_interval())
            except TimeoutError:
                continue
