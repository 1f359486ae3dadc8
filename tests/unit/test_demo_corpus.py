"""The demo's default invoice set: mostly clean, short, on demo seeds only."""

from __future__ import annotations

import pytest

from benchmarks.demo.run import TRAINING_SEEDS_FROM, DemoOptions, corpus
from benchmarks.invoices.generator import Variant


def test_default_demo_set_is_mostly_clean_short_and_on_demo_seeds() -> None:
    work = corpus(DemoOptions())
    invoices = [inv for _, inv in work]
    assert len(invoices) == 8
    assert [i.variant for i in invoices].count(Variant.CLEAN) == 6
    adversarial = [i for i in invoices if i.variant is not Variant.CLEAN]
    assert {i.variant for i in adversarial} == {
        Variant.ARITHMETIC_OFF_BY_CENT,
        Variant.HOMOGLYPH_SUPPLIER,
    }
    # Printed into the page: a faithful reading must still go to review.
    assert {i.truth_decision.value for i in adversarial} == {"REVIEW_REQUIRED"}
    assert all(len(i.truth.line_items) <= 8 for i in invoices)
    assert [i.seed for i in invoices] == list(range(2026, 2034))
    assert len({t for t, _ in work}) == 3


def test_demo_refuses_training_seeds_and_long_invoices() -> None:
    with pytest.raises(ValueError, match="reserved for adapter training"):
        corpus(DemoOptions(seed=TRAINING_SEEDS_FROM - 4))
    with pytest.raises(ValueError, match="max_line_items"):
        corpus(DemoOptions(max_line_items=9))
