"""The OCR replicas' scaling rule: up on pages waiting, down only well below the
replicas, hold in the band between, always within the pool's bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deployments.ocr_autoscaling import HeldProposal, OcrAutoscaling, decide
from deployments.pools import OcrPoolConfig

SCALING = OcrAutoscaling(min_replicas=2, max_replicas=8, target_waiting_per_replica=1)


def test_pages_waiting_beyond_the_target_add_replicas_for_them() -> None:
    # 4 replicas busy, 4 waiting: 1 a replica, the target: hold.
    assert decide(SCALING, current=4, waiting=4, in_flight=4) == 4
    # One page more: one replica more at least.
    assert decide(SCALING, current=4, waiting=5, in_flight=4) == 5
    # 20 pages waiting on 4 replicas: enough for (4 + 20) / 2 pages a replica.
    assert decide(SCALING, current=4, waiting=20, in_flight=4) == 8
    # 500 pages of one upload: the max, never beyond.
    assert decide(SCALING, current=4, waiting=500, in_flight=4) == 8


def test_an_idle_pool_shrinks_to_its_min_and_a_half_busy_one_holds() -> None:
    assert decide(SCALING, current=8, waiting=0, in_flight=0) == 2
    assert decide(SCALING, current=8, waiting=0, in_flight=4) == 8  # at the fraction: hold
    assert decide(SCALING, current=8, waiting=0, in_flight=3) == 6  # lands inside the band
    # ... where the next pass holds instead of scaling back up (no flapping).
    assert decide(SCALING, current=6, waiting=0, in_flight=3) == 6


def test_the_bounds_hold_whatever_the_queue() -> None:
    for current in range(2, 9):
        for waiting in (0, 1, 3, 10, 1000):
            for in_flight in range(current + 1):
                got = decide(SCALING, current, waiting, in_flight)
                assert 2 <= got <= 8
                demand = waiting + in_flight
                if demand > current * 2:  # over the target: never fewer
                    assert got >= min(8, current + 1)
                if got < current:  # down only with pages for at most half the replicas
                    assert demand <= current * SCALING.downscale_fraction


def test_the_section_and_the_pool_agree_on_their_bounds() -> None:
    with pytest.raises(ValidationError):
        OcrAutoscaling(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError):  # starts outside its range
        OcrPoolConfig(replicas=1, autoscaling=SCALING)
    pool = OcrPoolConfig(replicas=4, autoscaling=SCALING)
    assert pool.max_replicas == 8
    # The page budget follows the running replicas, unless the file fixes it.
    assert (pool.pages_budget(), pool.pages_budget(6)) == (4, 6)
    fixed = OcrPoolConfig(replicas=4, max_pages_in_flight=5, autoscaling=SCALING)
    assert fixed.pages_budget(6) == 5
    with pytest.raises(ValueError):
        decide(SCALING, current=2, waiting=-1, in_flight=0)


def test_a_proposal_is_acted_on_only_once_it_has_held_its_delay() -> None:
    held = HeldProposal(
        OcrAutoscaling(min_replicas=1, max_replicas=8, upscale_delay_s=10, downscale_delay_s=60)
    )
    assert not held.ready(2, 4, now=0.0)  # first seen
    assert not held.ready(2, 4, now=9.9)
    assert held.ready(2, 4, now=10.0)  # held 10 s: grow
    # Acted on: the next proposal starts its own clock.
    assert not held.ready(4, 6, now=10.5)
    # A pass that holds breaks the run; the proposal starts over.
    assert not held.ready(4, 4, now=15.0)
    assert not held.ready(4, 6, now=16.0)
    assert not held.ready(4, 6, now=25.9)
    assert held.ready(4, 6, now=26.0)


def test_another_count_starts_the_delay_over_and_shrinking_waits_longer() -> None:
    held = HeldProposal(
        OcrAutoscaling(min_replicas=1, max_replicas=8, upscale_delay_s=10, downscale_delay_s=60)
    )
    assert not held.ready(4, 6, now=0.0)
    assert not held.ready(4, 7, now=8.0)  # another count: from 8 s, not from 0
    assert not held.ready(4, 7, now=17.9)
    assert held.ready(4, 7, now=18.0)
    assert not held.ready(7, 2, now=20.0)
    assert not held.ready(7, 2, now=79.9)  # the downscale delay, not the upscale one
    assert held.ready(7, 2, now=80.0)


def test_without_delays_a_proposal_is_acted_on_at_once() -> None:
    held = HeldProposal(OcrAutoscaling(min_replicas=1, max_replicas=8, downscale_delay_s=0))
    assert held.ready(1, 3, now=0.0)
    assert held.ready(3, 1, now=0.0)
