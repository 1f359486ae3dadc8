"""One typed shape for the events a component lets others react to.

A hook is ``async hook(conn, event) -> None``; a :class:`Hooks` registry runs its
hooks in the order they were added. The first type parameter says *when* they run:

* ``Hooks[asyncpg.Connection, E]``: inside the transaction that writes the event
  (a job settled, a job accepted). A hook writes with that connection, and a hook
  that raises rolls the whole transaction back: its rows and the event commit
  together or not at all (the delivery rows of a success; the crash seam of intake).
* ``Hooks[None, E]``: after the commit (a driver handing a settled job to the
  delivery actor). There is no connection to write with, and a hook that raises
  cannot undo the event; the caller decides whether to log or propagate.

The sites: :attr:`pipeline.jobs.JobStore.settle_hooks`,
``pipeline.api.intake.IntakeService.accept_hooks``,
``pipeline.worker.attempt.AttemptRunner.on_settled``, and after the fact
``pipeline.messaging.consumer.QueueConsumer.on_settled`` (a delivery acked or
requeued) and ``pipeline.messaging.outbox.OutboxRelay.on_batch`` (a relay round).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Generic, TypeAlias, TypeVar

#: What a hook is given besides the event: the transaction's connection, or None.
C = TypeVar("C")
#: The event.
E = TypeVar("E")

Hook: TypeAlias = Callable[[C, E], Awaitable[None]]


class Hooks(Generic[C, E]):
    """An ordered registry of hooks for one kind of event.

    Invariant: :meth:`run` awaits every hook in the order added, one at a time,
    and stops at the first that raises, raising its exception to the caller (so a
    transaction it runs in rolls back).
    """

    def __init__(self, hooks: Iterable[Hook[C, E]] = ()) -> None:
        self._hooks: list[Hook[C, E]] = list(hooks)

    def add(self, hook: Hook[C, E]) -> None:
        """Run ``hook`` after the ones already added."""
        self._hooks.append(hook)

    def extend(self, hooks: Iterable[Hook[C, E]]) -> None:
        for hook in hooks:
            self.add(hook)

    def __iter__(self) -> Iterator[Hook[C, E]]:
        return iter(tuple(self._hooks))

    def __len__(self) -> int:
        return len(self._hooks)

    async def run(self, conn: C, event: E) -> None:
        """Await each hook with ``conn`` and ``event``; the first failure propagates."""
        for hook in tuple(self._hooks):
            await hook(conn, event)
