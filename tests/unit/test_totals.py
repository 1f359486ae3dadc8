"""The one case where grounding replaces a model's total: it copied another total."""

from __future__ import annotations

from decimal import Decimal as D

from pipeline.extraction.totals import GROSS, NET, TAX, misplaced_total


def test_a_copied_total_is_replaced_when_both_sums_confirm_it() -> None:
    sums = {"items_sum": D("100.00"), "tax_lines_sum": D("19.00")}
    assert misplaced_total(D("100.00"), D("119.00"), D("119.00"), **sums) == (TAX, D("19.00"))
    assert misplaced_total(D("100.00"), D("19.00"), D("100.00"), **sums) == (GROSS, D("119.00"))
    assert misplaced_total(D("119.00"), D("19.00"), D("119.00"), **sums) == (NET, D("100.00"))


def test_nothing_is_replaced_without_a_copy_or_a_second_confirmation() -> None:
    sums = {"items_sum": D("100.00"), "tax_lines_sum": D("19.00")}
    assert misplaced_total(D("100.00"), D("19.00"), D("119.00"), **sums) is None  # consistent
    assert misplaced_total(D("100.00"), D("19.01"), D("119.00"), **sums) is None  # no copy
    assert misplaced_total(D("100.00"), D("119.00"), D("119.00"), items_sum=D("100.00"),
                           tax_lines_sum=None) is None  # fmt: skip
    assert misplaced_total(D("100.00"), D("119.00"), D("119.00"), items_sum=D("99.00"),
                           tax_lines_sum=D("19.00")) is None  # fmt: skip
    assert misplaced_total(None, D("19.00"), D("119.00"), **sums) is None
