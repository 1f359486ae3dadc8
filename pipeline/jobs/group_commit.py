"""Group commit for finished attempts: those that finish together settle in one transaction.

A driver runs many attempts at once; on an engine that batches decoding they
tend to finish in bursts. :class:`GroupCommit` adds no waiting: the first
success to arrive commits at once, alone, through
:meth:`~pipeline.jobs.store.JobStore.succeed`; successes that arrive while a
commit is in flight queue up and go together in the next transaction through
:meth:`~pipeline.jobs.batch_settling.BatchSettling.succeed_many` (at most
``max_batch``). Under load a commit therefore carries everything that finished
during the previous one; when attempts finish apart, nothing changes.

Each caller still gets its own answer, exactly as from ``succeed``: its
:class:`~pipeline.jobs.records.Settled`, or :class:`~pipeline.errors.LeaseLost`
when its fence no longer holds (the others of the batch commit). If a batch
fails as a whole (a hook raising, a lost connection), its attempts are settled
one by one, so a failure reaches only the attempt it belongs to.
"""

from __future__ import annotations

import asyncio
import logging

from pipeline.errors import LeaseLost
from pipeline.jobs.records import Settled, Success
from pipeline.jobs.store import JobStore

log = logging.getLogger(__name__)


class GroupCommit:
    """Queues successes and commits whatever has gathered, one transaction at a time."""

    def __init__(self, store: JobStore, *, max_batch: int = 16) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.store = store
        self.max_batch = max_batch
        self._queue: list[tuple[Success, asyncio.Future[Settled]]] = []
        self._drainer: asyncio.Task[None] | None = None
        #: Transactions committed, by size: {1: n, 5: m, ...} (for tests and stats).
        self.batches: dict[int, int] = {}

    async def succeed(self, success: Success) -> Settled:
        """Commit ``success`` under its fence, with whatever else is waiting.

        Raises:
            LeaseLost: the attempt's fence or lease no longer held; nothing of it
                was written.
        """
        future: asyncio.Future[Settled] = asyncio.get_running_loop().create_future()
        self._queue.append((success, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="group-commit")
        # A cancelled caller does not cancel the commit: its outcome, if its fence
        # holds, is as legitimate as any other and the others share its transaction.
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            self.batches[len(batch)] = self.batches.get(len(batch), 0) + 1
            if len(batch) == 1:
                await self._one(*batch[0])
                continue
            try:
                outcome = await self.store.succeed_many([s for s, _ in batch])
            except Exception:
                log.warning("batch of %d rolled back; settling one by one", len(batch))
                for success, future in batch:
                    await self._one(success, future)
                continue
            settled = {s.job_id: s for s in outcome.settled}
            for success, future in batch:
                lease = success.lease
                if lease.job_id in settled:
                    _resolve(future, result=settled[lease.job_id])
                else:
                    _resolve(
                        future,
                        error=LeaseLost(
                            f"job {lease.job_id} fence {lease.fence}: completion rejected"
                        ),
                    )

    async def _one(self, success: Success, future: asyncio.Future[Settled]) -> None:
        try:
            settled = await self.store.succeed(
                success.lease,
                result=success.result,
                validation=success.validation,
                decision=success.decision,
                policy_version=success.policy_version,
                usage=success.usage,
            )
        except Exception as exc:
            _resolve(future, error=exc)
        else:
            _resolve(future, result=settled)


def _resolve(
    future: asyncio.Future[Settled],
    *,
    result: Settled | None = None,
    error: BaseException | None = None,
) -> None:
    if future.done():  # pragma: no cover - each future is resolved once
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert result is not None
        future.set_result(result)
