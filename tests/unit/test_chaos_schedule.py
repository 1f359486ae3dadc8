"""The chaos fault schedule: the seed alone decides it, faults never overlap."""

from __future__ import annotations

import itertools

from benchmarks.chaos.schedule import ALL_KINDS, CI_KINDS, FaultKind, fault_schedule, span


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    a = fault_schedule(17, CI_KINDS, rounds=2)
    assert a == fault_schedule(17, CI_KINDS, rounds=2)
    assert a != fault_schedule(18, CI_KINDS, rounds=2)


def test_every_kind_comes_rounds_times_one_after_another() -> None:
    faults = fault_schedule(3, ALL_KINDS, rounds=3, start_s=5, drivers=4)
    kinds = [f.kind for f in faults]
    for kind in ALL_KINDS:
        want = 1 if kind is FaultKind.RABBITMQ_RESTART else 3
        assert kinds.count(kind) == want, kind
    assert faults[0].at >= 5
    for before, after in itertools.pairwise(faults):
        assert after.at > before.at + before.duration
    assert {f.target for f in faults} <= {0, 1, 2, 3}
    assert span(faults) == faults[-1].at + faults[-1].duration
