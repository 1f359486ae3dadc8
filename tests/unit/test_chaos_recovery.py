"""Recovery after a chaos fault: throughput back to the offered rate vs backlog caught up."""

from __future__ import annotations

from benchmarks.chaos.faults import FaultRecord
from benchmarks.chaos.report import recovery_times, rescore, within


def _run(rate_before: float, rate_during: float, rate_after: float, *, offered: float) -> list:
    """Samples every 0.5 s for 40 s: arrivals at ``offered``/s throughout; settles at
    ``rate_before`` until 10 s, ``rate_during`` from 10 to 14 s (the fault), then
    ``rate_after``."""
    samples, settled = [], 0.0
    for i in range(81):
        t = i * 0.5
        if i:
            rate = rate_before if t <= 10 else rate_during if t <= 14 else rate_after
            settled += rate * 0.5
        samples.append({"t": t, "accepted": offered * t, "settled": min(settled, offered * t)})
    return samples


FAULT = FaultRecord("driver_kill_mid_call", 10.0, 10.0, 14.0, True, "")


def test_throughput_recovers_long_before_the_backlog_catches_up() -> None:
    # 4 jobs/s offered; nothing settles during the fault (16 jobs pile up); afterwards the
    # system settles 5 jobs/s, so its rate is back at once but the pile takes 16 s to clear.
    samples = _run(4, 0, 5, offered=4)
    (r,) = recovery_times([FAULT], samples, offered_rate=4)
    assert r["recovery_s"] is not None and r["recovery_s"] <= 3.0
    assert r["catch_up_s"] is not None and 11.0 <= r["catch_up_s"] <= 14.0
    assert within([r], "recovery_s", 8) == 1 and within([r], "catch_up_s", 8) == 0


def test_a_system_that_stays_slow_never_recovers() -> None:
    samples = _run(4, 0, 2, offered=4)  # half the offered rate after the fault
    (r,) = recovery_times([FAULT], samples, offered_rate=4)
    assert r["recovery_s"] is None and r["catch_up_s"] is None


def test_a_fault_that_costs_nothing_recovers_at_its_end() -> None:
    samples = _run(4, 4, 4, offered=4)
    (r,) = recovery_times([FAULT], samples, offered_rate=4)
    assert r["recovery_s"] == 0.0 and r["catch_up_s"] == 0.0


def test_a_stored_run_is_scored_again_with_the_same_rules() -> None:
    samples = _run(4, 0, 5, offered=4)
    stored = {
        "invoices": 160,
        "faults": [FAULT.as_dict()],
        "samples": samples,
        "metrics": {"lease_s": 4.0, "offered_rate_per_s": 4.0},
    }
    figures = rescore(stored)
    assert figures["recovery_s"] == recovery_times([FAULT], samples, offered_rate=4)
    assert figures["recovered_within_two_leases"] == 1
    assert figures["caught_up_within_two_leases"] == 0
