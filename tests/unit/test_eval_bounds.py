"""The false-accept bound every report prints next to its count."""

from __future__ import annotations

import math

import pytest

from benchmarks.eval.bounds import _binomial_cdf, false_accept_bound


def test_zero_events_has_the_closed_form() -> None:
    assert false_accept_bound(0, 5000) == pytest.approx(1 - 0.05 ** (1 / 5000))
    assert false_accept_bound(0, 5000) < 0.0006  # the target for 5,000 perfect answers
    assert false_accept_bound(0, 200) == pytest.approx(0.01487, abs=1e-4)


def test_bound_makes_seeing_k_or_fewer_as_unlikely_as_asked() -> None:
    for k, n in ((1, 10), (3, 48), (8, 14), (2, 5000)):
        p = false_accept_bound(k, n)
        assert p is not None
        assert k / n < p < 1
        assert _binomial_cdf(k, n, p) == pytest.approx(0.05, abs=1e-6)


def test_reference_values() -> None:
    # R: binom.test(1, 10, alternative = "less")$conf.int[2] = 0.3941633
    assert false_accept_bound(1, 10) == pytest.approx(0.3941633, abs=1e-6)


def test_edges() -> None:
    assert false_accept_bound(0, 0) is None
    assert false_accept_bound(4, 4) == 1.0
    assert math.isclose(false_accept_bound(0, 1, confidence=0.5) or 0, 0.5)
    with pytest.raises(ValueError):
        false_accept_bound(5, 4)
    with pytest.raises(ValueError):
        false_accept_bound(0, 10, confidence=1.0)
