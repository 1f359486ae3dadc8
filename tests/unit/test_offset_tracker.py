"""The Kafka ingress commits only a contiguous durable prefix (spec §2)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.messaging.offsets import OffsetTracker

P0 = ("subs", 0)
P1 = ("subs", 1)


def test_an_unfinished_offset_holds_back_every_later_one() -> None:
    t = OffsetTracker()
    for o in (40, 41, 42):
        t.read(P0, o)
    t.durable(P0, 41)
    t.durable(P0, 42)
    assert t.to_commit() == {}  # 40 is not durable: nothing past it
    assert t.outstanding == 3  # the durable ones wait behind it
    t.durable(P0, 40)
    assert t.to_commit() == {P0: 43}
    assert t.outstanding == 0


def test_the_position_is_the_next_record_to_read() -> None:
    t = OffsetTracker()
    t.read(P0, 41)
    t.durable(P0, 41)
    assert t.to_commit() == {P0: 42}


def test_gaps_in_the_offsets_read_do_not_hold_the_prefix() -> None:
    # Compaction or a transaction marker: 41 is never delivered.
    t = OffsetTracker()
    t.read(P0, 40)
    t.read(P0, 42)
    t.durable(P0, 42)
    assert t.to_commit() == {}
    t.durable(P0, 40)
    assert t.to_commit() == {P0: 43}


def test_partitions_advance_independently() -> None:
    t = OffsetTracker()
    t.read(P0, 0)
    t.read(P1, 0)
    t.read(P1, 1)
    t.durable(P1, 0)
    t.durable(P1, 1)
    assert t.to_commit() == {P1: 2}


def test_a_confirmed_commit_is_not_offered_again_and_a_failed_one_is() -> None:
    t = OffsetTracker()
    t.read(P0, 0)
    t.durable(P0, 0)
    assert t.to_commit() == {P0: 1}
    assert t.to_commit() == {P0: 1}  # not confirmed yet: offered again
    t.committed({P0: 1})
    assert t.to_commit() == {}
    t.read(P0, 1)
    t.durable(P0, 1)
    assert t.to_commit() == {P0: 2}


def test_revoke_forgets_the_partition_and_ignores_late_completions() -> None:
    t = OffsetTracker()
    t.read(P0, 5)
    t.read(P0, 6)
    t.read(P1, 0)
    t.durable(P0, 6)
    assert t.waiting(P0, 5) and not t.waiting(P0, 6) and not t.waiting(P0, 7)
    t.revoke([P0])
    assert not t.waiting(P0, 5)  # a held record of it is not ours to retry any more
    assert t.partitions() == [P1]
    assert t.outstanding == 1
    assert t.durable(P0, 5) is False  # another consumer owns it now
    assert t.to_commit() == {}
    t.committed({P0: 7})  # a commit for a revoked partition changes nothing
    assert t.partitions() == [P1]
    # Assigned again later: the records are read again from the committed position.
    t.read(P0, 5)
    t.durable(P0, 5)
    assert t.to_commit() == {P0: 6}


def test_offsets_read_out_of_order_are_a_bug() -> None:
    t = OffsetTracker()
    t.read(P0, 3)
    with pytest.raises(ValueError, match="out of order"):
        t.read(P0, 3)
    t.durable(P0, 3)
    with pytest.raises(ValueError, match="out of order"):
        t.read(P0, 2)  # behind the position already reached
    assert t.durable(P0, 99) is False  # never read


@given(
    st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=40),
    st.randoms(use_true_random=False),
)
def test_the_position_never_passes_an_offset_not_yet_durable(
    steps: list[int], rng: random.Random
) -> None:
    t = OffsetTracker()
    offsets, o = [], 0
    for step in steps:
        o += step
        offsets.append(o)
        t.read(P0, o)
    order = offsets[:]
    rng.shuffle(order)
    done: set[int] = set()
    last: int | None = None  # the last position committed
    for offset in order:
        t.durable(P0, offset)
        done.add(offset)
        position = t.to_commit().get(P0, last)
        unfinished = [x for x in offsets if x not in done]
        if position is None:  # nothing committable yet: the first record is unfinished
            assert unfinished[0] == offsets[0]
            continue
        # Every record before the position is durable; the first unfinished one is not passed.
        assert all(x in done for x in offsets if x < position)
        if unfinished:
            assert position <= unfinished[0]
        else:
            assert position == offsets[-1] + 1
        t.committed({P0: position})
        last = position
