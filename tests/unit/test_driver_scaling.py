"""The driver scaling decision (pipeline.worker.scaling): each rule, and no flapping."""

from __future__ import annotations

import itertools

import pytest

from pipeline.worker import ScalingConfig, ScalingSignal, ScalingState, best_headroom, decide
from pipeline.worker import headroom as headroom_of

CFG = ScalingConfig(
    min_drivers=1,
    max_drivers=6,
    scale_up_age_seconds=10,
    scale_down_age_seconds=1,
    scale_down_idle_seconds=30,
    cooldown_seconds=15,
    min_headroom=0.05,
)


def sig(
    now: float,
    drivers: int,
    age: float | None,
    runnable: int = 0,
    running: int = 0,
    headroom: float | None = None,
) -> ScalingSignal:
    return ScalingSignal(now, drivers, 4, age, runnable, running, headroom)


def test_backlog_older_than_threshold_adds_enough_drivers_for_it() -> None:
    d = decide(CFG, sig(100, 1, age=12, runnable=14, running=4), ScalingState())
    # ceil((4 running + 14 runnable) / 4 per driver) = 5
    assert (d.desired, d.reason) == (5, "backlog_age")
    assert d.state.changed_at == 100


def test_young_backlog_does_not_scale_however_long() -> None:
    d = decide(CFG, sig(100, 1, age=9.9, runnable=500, running=4), ScalingState())
    assert (d.desired, d.reason) == (1, "hold")


def test_scale_up_is_at_least_one_and_at_most_max() -> None:
    assert decide(CFG, sig(0, 2, age=11, runnable=1, running=0), ScalingState()).desired == 3
    assert decide(CFG, sig(0, 2, age=11, runnable=900, running=8), ScalingState()).desired == 6
    at_max = decide(CFG, sig(0, 6, age=60, runnable=900), ScalingState())
    assert (at_max.desired, at_max.reason) == (6, "at_max")


def test_a_full_admission_budget_blocks_scale_up_and_unknown_does_not() -> None:
    full = decide(CFG, sig(0, 2, age=30, runnable=40, headroom=0.01), ScalingState())
    assert (full.desired, full.reason) == (2, "no_headroom")
    room = decide(CFG, sig(0, 2, age=30, runnable=40, headroom=0.5), ScalingState())
    unknown = decide(CFG, sig(0, 2, age=30, runnable=40, headroom=None), ScalingState())
    assert room.desired == unknown.desired == 6


def test_cooldown_holds_a_second_change() -> None:
    first = decide(CFG, sig(0, 1, age=11, runnable=4), ScalingState())
    assert first.desired == 2
    again = decide(CFG, sig(10, 2, age=25, runnable=40), first.state)
    assert (again.desired, again.reason) == (2, "cooldown")
    later = decide(CFG, sig(15, 2, age=30, runnable=40), again.state)
    assert (later.desired, later.reason) == (6, "backlog_age")


def test_scale_down_only_after_a_whole_drained_window_and_keeps_running_leases() -> None:
    state = ScalingState(changed_at=0)
    d = decide(CFG, sig(100, 6, age=None, running=9), state)
    assert (d.desired, d.reason, d.state.drained_since) == (6, "hold", 100)
    d = decide(CFG, sig(129, 6, age=0.5, runnable=2, running=9), d.state)
    assert d.desired == 6  # drained (young work only) but not for 30 s yet
    d = decide(CFG, sig(130, 6, age=None, running=9), d.state)
    # ceil(9 running / 4) = 3 drivers keep the running leases' room; min is 1.
    assert (d.desired, d.reason) == (3, "drained")
    d = decide(CFG, sig(200, 3, age=None, running=0), d.state)
    assert (d.desired, d.reason) == (1, "drained")


def test_a_break_in_the_drain_restarts_the_idle_window() -> None:
    d = decide(CFG, sig(100, 4, age=None), ScalingState())
    d = decide(CFG, sig(120, 4, age=5, runnable=3), d.state)  # not drained, not old enough
    assert d.state.drained_since is None and d.desired == 4
    d = decide(CFG, sig(125, 4, age=None), d.state)
    d = decide(CFG, sig(150, 4, age=None), d.state)
    assert d.desired == 4  # 25 s since the break, not 30
    assert decide(CFG, sig(155, 4, age=None), d.state).desired == 1


def test_bounds_restore_the_minimum_at_once_and_drain_above_the_maximum() -> None:
    cooling = ScalingState(changed_at=99)
    low = decide(CFG, sig(100, 0, age=None), cooling)
    assert (low.desired, low.reason) == (1, "below_min")
    high = decide(CFG, sig(200, 9, age=None), ScalingState())
    assert (high.desired, high.reason) == (6, "above_max")


def test_a_backlog_oscillating_around_the_threshold_does_not_flap() -> None:
    """Age alternating 9 s / 11 s every 2 s for 10 minutes: up steps only, no down."""
    state, drivers, changes = ScalingState(), 1, []
    for step in range(300):
        now = step * 2.0
        age = 11.0 if step % 2 else 9.0
        d = decide(CFG, sig(now, drivers, age=age, runnable=3, running=4 * drivers), state)
        state = d.state
        if d.desired != drivers:
            changes.append((now, drivers, d.desired))
            drivers = d.desired
    assert changes and all(after > before for _, before, after in changes)  # never down
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(changes)]
    assert all(g >= CFG.cooldown_seconds for g in gaps)


def test_config_is_validated_and_read_from_settings() -> None:
    from pipeline.settings import Settings

    with pytest.raises(ValueError):
        ScalingConfig(min_drivers=3, max_drivers=2)
    with pytest.raises(ValueError):
        ScalingConfig(scale_up_age_seconds=1, scale_down_age_seconds=1)
    s = Settings(driver_min=3, driver_scale_up_age_seconds=4, driver_scale_cooldown_seconds=2)
    cfg = ScalingConfig.from_settings(s, default_max=2)
    assert (cfg.min_drivers, cfg.max_drivers) == (2, 2)  # the minimum is lowered to the max
    cfg = ScalingConfig.from_settings(Settings(driver_max=7), default_max=2)
    assert (cfg.max_drivers, cfg.scale_up_age_seconds, cfg.cooldown_seconds) == (7, 10, 15)


def test_headroom_is_the_tightest_limit_and_zero_in_cooldown() -> None:
    snap = {
        "limits": {"max_in_flight": 10, "max_concurrent_tokens": 1000, "rpm": None},
        "in_flight": 2,
        "in_flight_tokens": 900,
        "window_requests": 50,
        "cooldown_remaining": 0.0,
    }
    assert headroom_of(snap) == pytest.approx(0.1)
    assert headroom_of({**snap, "cooldown_remaining": 3.0}) == 0.0
    assert headroom_of({"limits": {"rpm": None}}) is None
    assert best_headroom([None, 0.0, 0.4]) == 0.4
    assert best_headroom([None]) is None
