"""Which Kafka offsets may be committed: the contiguous durable prefix per partition.

The Kafka ingress (:mod:`pipeline.messaging.kafka_ingress`) handles several records
at once, so they finish out of order. A committed offset says "every record before
this one is durably in the inbox": after offsets 40, 41, 42 were read and 41 and 42
are durable but 40 is not, nothing may be committed; once 40 is durable too, 43 may.

Offsets a partition delivers may skip numbers (compaction, transaction markers): the
prefix runs over the records *read*, not over the integers, so after 40 and 42 are
durable the position to commit is 43.

This class is pure (no client, no clock) so its rules are tested alone
(``tests/unit/test_offset_tracker.py``):

* :meth:`read` a record before it is handled, :meth:`durable` once its inbox row
  committed; :meth:`to_commit` gives the positions that moved, :meth:`committed`
  records what the broker confirmed (a failed commit is simply offered again).
* :meth:`revoke` forgets a partition the group took away; what was read and not
  committed there is read again by its next owner and deduplicated by the inbox. A
  :meth:`durable` that arrives after the revocation is ignored.
* :attr:`outstanding` counts records read and not yet behind a commit position (the
  durable ones waiting behind a slow record included), so the ingress's window
  bounds memory as well as work.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

#: A partition: (topic, partition number).
Partition = tuple[str, int]


@dataclass
class _PartitionState:
    #: Records read and not yet behind ``position``, in offset order: offset → durable.
    pending: OrderedDict[int, bool] = field(default_factory=OrderedDict)
    #: The next offset to read after the durable prefix (what a commit would say).
    position: int | None = None
    #: The last position the broker confirmed.
    committed: int | None = None


class OffsetTracker:
    """Contiguous durable prefixes of offsets, per partition."""

    def __init__(self) -> None:
        self._parts: dict[Partition, _PartitionState] = {}

    @property
    def outstanding(self) -> int:
        """Records read and not yet behind a commit position, over all partitions."""
        return sum(len(s.pending) for s in self._parts.values())

    def partitions(self) -> list[Partition]:
        return sorted(self._parts)

    def read(self, part: Partition, offset: int) -> None:
        """A record was read and is about to be handled.

        Raises:
            ValueError: ``offset`` is not above every offset read on ``part`` (a
                partition delivers in order; anything else is a bug upstream).
        """
        state = self._parts.setdefault(part, _PartitionState())
        if state.pending:
            lowest = next(reversed(state.pending)) + 1  # above the last one read
        else:
            lowest = state.position if state.position is not None else 0
        if offset < lowest:
            raise ValueError(f"{part}: offset {offset} read out of order (expected >= {lowest})")
        state.pending[offset] = False

    def durable(self, part: Partition, offset: int) -> bool:
        """The record at ``offset`` is durably in the inbox. False when ignored: the
        partition was revoked, or the offset was never read (or is already behind)."""
        state = self._parts.get(part)
        if state is None or offset not in state.pending:
            return False
        state.pending[offset] = True
        while state.pending:
            first, done = next(iter(state.pending.items()))
            if not done:
                break
            state.pending.popitem(last=False)
            state.position = first + 1
        return True

    def waiting(self, part: Partition, offset: int) -> bool:
        """The record at ``offset`` was read here and is not durable yet (False once
        its partition is revoked)."""
        state = self._parts.get(part)
        return state is not None and state.pending.get(offset) is False

    def to_commit(self) -> dict[Partition, int]:
        """The positions to commit now: each partition's whose durable prefix moved
        past what the broker last confirmed."""
        return {
            part: s.position
            for part, s in self._parts.items()
            if s.position is not None and (s.committed is None or s.position > s.committed)
        }

    def committed(self, positions: dict[Partition, int]) -> None:
        """The broker confirmed ``positions`` (a revoked partition's are ignored)."""
        for part, position in positions.items():
            state = self._parts.get(part)
            if state is not None and (state.committed is None or position > state.committed):
                state.committed = position

    def revoke(self, parts: list[Partition]) -> None:
        """Forget ``parts``: their records are another consumer's now."""
        for part in parts:
            self._parts.pop(part, None)
