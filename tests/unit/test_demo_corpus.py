"""The demo's default invoice set: mostly clean, short, on demo seeds only."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

import pytest

from benchmarks.demo.corpus import (
    ANCHOR_LEAD_DAYS,
    DEMO_ANCHOR,
    TRAINING_SEEDS_FROM,
    DemoOptions,
    corpus,
    demo_anchor,
)
from benchmarks.invoices.generator import Variant
from pipeline.validation import DEFAULT_POLICY


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


def test_the_demo_prints_the_same_pages_whatever_day_it_runs() -> None:
    """Dated before a fixed day, not before today: the outcome follows the code alone."""
    opts = DemoOptions()
    days = (date(2026, 12, 4), date(2027, 3, 1), date(2028, 6, 30))
    anchors = [demo_anchor(opts, today) for today in days]
    assert anchors == [(DEMO_ANCHOR, None)] * 3
    pages = [[inv.ocr_text for _, inv in corpus(opts, a)] for a, _ in anchors]
    assert pages[0] == pages[1] == pages[2]
    issued = [
        date.fromisoformat(str(inv.truth.issue_date.value)) for _, inv in corpus(opts, DEMO_ANCHOR)
    ]
    assert all(DEMO_ANCHOR - timedelta(days=ANCHOR_LEAD_DAYS) <= d < DEMO_ANCHOR for d in issued)


def test_the_demo_dates_before_today_once_the_fixed_day_is_too_old_or_ahead() -> None:
    opts = DemoOptions()
    last_good = (
        DEMO_ANCHOR
        - timedelta(days=ANCHOR_LEAD_DAYS)
        + timedelta(days=DEFAULT_POLICY.max_invoice_age_days)
    )
    assert demo_anchor(opts, last_good) == (DEMO_ANCHOR, None)
    late = last_good + timedelta(days=1)
    anchor, why = demo_anchor(opts, late)
    assert anchor == late and why is not None and "over 730 days old" in why
    early = DEMO_ANCHOR - timedelta(days=1)
    anchor, why = demo_anchor(opts, early)
    assert anchor == early and why is not None and "after today" in why
    today = date(2027, 5, 5)
    assert demo_anchor(replace(opts, anchor=None), today) == (today, None)
    assert demo_anchor(replace(opts, anchor=date(2027, 1, 1)), today) == (date(2027, 1, 1), None)
