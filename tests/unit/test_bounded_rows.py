"""Row reading is quadratic and capped, and reads every row as the cubic search did.

:func:`~pipeline.extraction.row_arithmetic.parse_item_row` once tried every triple of a line's
numbers, sorted: a table flattened onto one line (PDF text read without layout) took
19 s of CPU for 60 items. The oracle below is that search, kept verbatim: the indexed
search must pick the same triple on any row it reads.
"""

from __future__ import annotations

import time
from decimal import Decimal
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.invoices import Variant, generate_invoice
from pipeline.extraction.extractor import answer_for, prepare_call
from pipeline.extraction.row_arithmetic import (
    ROW_NUMBERS_MAX,
    ItemNumbers,
    _money,
    parse_item_row,
    parse_tax_row,
)
from pipeline.invoice import CENT, Printed
from pipeline.worker import interpret


def cubic_parse_item_row(numbers: list[Printed]) -> ItemNumbers | None:
    """The search every triple in order, as it was before it was indexed."""
    rates = [p for p in numbers if p.percent]
    plain = [p for p in numbers if not p.percent]
    rate = rates[-1] if rates else None
    best: tuple[Decimal, ItemNumbers] | None = None
    for q, p, a in sorted(
        combinations(plain, 3), key=lambda t: (-t[2].start, -t[1].start, -t[0].start)
    ):
        if a.value <= 0 and q.value * p.value != 0:
            continue
        gap = abs(_money(q.value * p.value) - a.value)
        if gap == 0:
            return ItemNumbers(q, p, a, rate, True)
        if gap <= CENT * 2 and (best is None or gap < best[0]):
            best = (gap, ItemNumbers(q, p, a, rate, False))
    return best[1] if best else None


def _printed(values: list[tuple[Decimal, bool]]) -> list[Printed]:
    out, at = [], 0
    for value, percent in values:
        text = f"{value}"
        out.append(Printed(at, at + len(text), text, value, percent, len(text.partition(".")[2])))
        at += len(text) + 1
    return out


#: Few distinct values, so that rows repeat values, hit products exactly and miss them
#: by a cent or two (the near readings), with zeros, negatives and three decimals.
_VALUES = st.sampled_from(
    [
        Decimal(v)
        for v in "0 1 2 3 -2 0.5 1.5 2.00 3.00 4.00 4.01 3.99 4.02 6.00 6.01 5.98 0.75 0.76 "
        "9 12.345 1.005 0.01 -4.00 0.00".split()
    ]
)
#: A row's numbers, one in four a percentage (a rate: never the quantity, price or amount).
_ROW = st.lists(st.tuples(_VALUES, st.sampled_from([False, False, False, True])), max_size=12)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ROW)
def test_the_indexed_search_reads_every_row_as_the_cubic_search(row: list) -> None:
    numbers = _printed(row)
    assert parse_item_row(numbers) == cubic_parse_item_row(numbers)


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, min_size=ROW_NUMBERS_MAX - 2, max_size=ROW_NUMBERS_MAX))
def test_rows_up_to_the_cap_read_as_before(values: list[Decimal]) -> None:
    numbers = _printed([(v, False) for v in values])
    assert parse_item_row(numbers) == cubic_parse_item_row(numbers)


def test_huge_numbers_near_a_product_are_found_beyond_the_context_precision() -> None:
    """An amount 0.01 from a 31-digit product: the window's bounds are exact."""
    big = Decimal("1" + "0" * 30)
    numbers = _printed([(big, False), (Decimal(1), False), (big + Decimal("0.01"), False)])
    assert parse_item_row(numbers) == cubic_parse_item_row(numbers)
    assert parse_item_row(numbers) is not None


def test_a_line_of_more_numbers_than_a_row_prints_is_no_row() -> None:
    row = [(Decimal(2), False), (Decimal(3), False), (Decimal("6.00"), False)]
    filler = [(Decimal(7), False)] * (ROW_NUMBERS_MAX - 3)
    assert parse_item_row(_printed(filler + row)) is not None
    assert parse_item_row(_printed([(Decimal(7), False), *filler, *row])) is None
    tax = [(Decimal(19), True), (Decimal("100.00"), False), (Decimal("19.00"), False)]
    assert parse_tax_row(_printed(tax)) is not None
    assert parse_tax_row(_printed(tax + [(Decimal(1), False)] * ROW_NUMBERS_MAX)) is None


def flattened(items: int, seed: int = 1) -> str:
    """A generated invoice whose item table is one line (PDF text read without layout)."""
    inv = generate_invoice(seed, Variant.CLEAN, line_items=items, layouts=("table",))
    lines = inv.ocr_text.split("\n")
    descriptions = [item.description for item in inv.truth.line_items]
    rows = [i for i, line in enumerate(lines) if any(d in line for d in descriptions)]
    first, last = rows[0], rows[-1] + 1
    one = " ".join(line.strip() for line in lines[first:last])
    return "\n".join([*lines[:first], one, *lines[last:]])


def test_a_table_of_60_items_on_one_line_prepares_in_under_a_second() -> None:
    text = flattened(60)
    assert max(len(line) for line in text.split("\n")) > 4000
    prepare_call("INVOICE 1 of 1 January 2024, total 10.00 EUR")  # process-wide caches
    started = time.process_time()
    prepare_call(text, limits=None)  # the reading itself, under no limit
    assert time.process_time() - started < 1.0


def test_a_flattened_table_is_interpreted_in_under_a_second() -> None:
    inv = generate_invoice(1, Variant.CLEAN, line_items=60, layouts=("table",))
    text = flattened(60)
    answer = answer_for(inv.truth, inv.ocr_text)  # cites the table's lines, now gone
    started = time.process_time()
    outcome = interpret(answer, text, inv.master_data, today=inv.today, limits=None)
    assert time.process_time() - started < 1.0
    assert outcome.report.reasons  # one line of a whole table is no proof: review
