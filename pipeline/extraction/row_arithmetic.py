"""A row's numbers by the arithmetic that ties them: which is quantity, price, amount, rate.

Under contract v2 a model copies amounts as printed ("1.234,56") and cites the
lines of line items and tax lines; it never converts a number. The invoice's number
reader (:mod:`pipeline.invoice.numbers`) reads a row's numbers; this module assigns
them: :func:`parse_item_row` and :func:`parse_tax_row` give a row's numbers to
quantity, unit price, amount and rate by the arithmetic that ties them (quantity x
price = amount, base x rate = tax), preferring print order. A row whose numbers do
not add up is still read, by the nearest reading, so the arithmetic rules of
validation can say what is wrong; nothing is corrected.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    InvalidOperation,
)
from itertools import combinations

from pipeline.cpu_budget import spend
from pipeline.invoice import CENT, CURRENCY_SYMBOLS, ISO_4217, Printed, numbers_in


@dataclass(frozen=True)
class ItemNumbers:
    """A line item's numbers as read from its row (printed forms kept for evidence)."""

    quantity: Printed
    unit_price: Printed
    line_amount: Printed
    rate: Printed | None
    exact: bool


def to_cents(value: Decimal) -> Decimal:
    """``value`` rounded to cents as a row's arithmetic compares it (see :func:`_money`)."""
    return _money(value)


def _money(value: Decimal) -> Decimal:
    """``value`` rounded to cents; a product too large for that (account or phone digits
    read as numbers) is returned as it is, and so never equals a printed amount."""
    try:
        return value.quantize(CENT, rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return value


#: The most plain numbers (not percentages) one row may offer, its lines together. A
#: row prints a quantity, a price, an amount and a few more (a position number, a
#: discount, an article number): at most 15 on 2,700 generated invoices of up to 200
#: items (seeds 0-299, every variant). More is no row but a table or a list of numbers
#: run together on one line (PDF text read without layout), whose every triple was once
#: tried: a 60-item table on one line took 19 s of CPU to prepare a call.
ROW_NUMBERS_MAX = 32
#: How far from a product :func:`parse_item_row` looks for an amount: wider than the two
#: cents it accepts, so the window never cuts off one it would accept.
_NEAR = CENT * 3
#: Sums and differences of printed numbers, exact: the window's bounds are never rounded.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def parse_item_row(numbers: list[Printed]) -> ItemNumbers | None:
    """Quantity, unit price, amount (and rate) of one row, by arithmetic then print order.

    Among ordered triples ``q < p < a`` (print positions) the first with
    ``round(q x p, 2) == a`` wins, latest amount first (amounts close a row), then
    the price and the quantity printed latest (a row's position number comes first). With
    none exact, the nearest within two cents is returned marked ``exact=False``, so the
    arithmetic rule reports the printed inconsistency. None: no reading at all, or more
    than :data:`ROW_NUMBERS_MAX` plain numbers (no row prints that many).

    The search is quadratic, not cubic: for each pair ``q < p`` the amounts are looked
    up by value (the latest print position of each value, which is the one the order
    above prefers) instead of tried one by one. The reading is the one the cubic search
    over every triple in that order gives (``tests/unit/test_bounded_rows.py`` keeps it
    as the oracle).
    """
    spend()
    rates = [p for p in numbers if p.percent]
    plain = [p for p in numbers if not p.percent]
    rate = rates[-1] if rates else None
    if len(plain) < 3 or len(plain) > ROW_NUMBERS_MAX:
        return None
    latest: dict[Decimal, int] = {}  # value -> the latest position printing it
    for k, printed in enumerate(plain):
        latest[printed.value] = k
    values = sorted(latest)
    exact: tuple[int, int, int] | None = None  # (k, j, i): the largest wins
    near: tuple[Decimal, int, int, int] | None = None  # (gap, -k, -j, -i): the least wins
    for j in range(1, len(plain) - 1):
        for i in range(j):
            raw = plain[i].value * plain[j].value
            product = _money(raw)
            at = latest.get(product)
            if at is not None and at > j and not (plain[at].value <= 0 and raw != 0):
                if exact is None or (at, j, i) > exact:
                    exact = (at, j, i)
                continue
            if exact is not None:
                continue  # an exact reading exists: no near one can win
            lo = bisect_left(values, _EXACT.subtract(product, _NEAR))
            hi = bisect_right(values, _EXACT.add(product, _NEAR))
            for value in values[lo:hi]:
                k = latest[value]
                if k <= j or (value <= 0 and raw != 0):
                    continue
                gap = abs(product - value)
                if 0 < gap <= CENT * 2 and (near is None or (gap, -k, -j, -i) < near):
                    near = (gap, -k, -j, -i)
    if exact is not None:
        k, j, i = exact
        return ItemNumbers(plain[i], plain[j], plain[k], rate, True)
    if near is not None:
        _, back_k, back_j, back_i = near
        return ItemNumbers(plain[-back_i], plain[-back_j], plain[-back_k], rate, False)
    return None


def parse_item_row_any_order(numbers: list[Printed]) -> ItemNumbers | None:
    """A row whose amount is not printed after both its factors ("315,78  25 %  Strips
    8,31  38 stk.": a table that sets its amount column first), read by arithmetic
    alone: the two factors in print order, the amount the product printed anywhere else.
    Exact readings only (an inexact one is no reading of such a row), for a row
    :func:`parse_item_row` reads none of; None where there is none, or where two
    readings name different amounts (no print order to choose by).
    """
    spend()
    rates = [p for p in numbers if p.percent]
    plain = [p for p in numbers if not p.percent]
    if len(plain) < 3 or len(plain) > ROW_NUMBERS_MAX:
        return None
    where: dict[Decimal, list[int]] = {}
    for k, printed in enumerate(plain):
        where.setdefault(printed.value, []).append(k)
    found: dict[int, tuple[int, int]] = {}  # amount's position -> the factors' positions
    for j in range(1, len(plain)):
        for i in range(j):
            raw = plain[i].value * plain[j].value
            for k in where.get(_money(raw), ()):
                if k not in (i, j) and not (plain[k].value <= 0 and raw != 0):
                    found.setdefault(k, (i, j))
    amounts = {plain[k].value for k in found}
    if len(amounts) != 1:
        return None
    k = max(found)
    i, j = found[k]
    return ItemNumbers(plain[i], plain[j], plain[k], rates[-1] if rates else None, True)


@dataclass(frozen=True)
class TaxNumbers:
    rate: Printed
    base: Printed
    amount: Printed


def parse_tax_row(numbers: list[Printed]) -> TaxNumbers | None:
    """Rate, base and tax amount of one tax row: the pair nearest ``base x rate = amount``
    (None past :data:`ROW_NUMBERS_MAX` plain numbers: the search is quadratic)."""
    rates = [p for p in numbers if p.percent]
    plain = [p for p in numbers if not p.percent]
    if not rates or len(plain) < 2 or len(plain) > ROW_NUMBERS_MAX:
        return None
    rate = rates[0]
    best: tuple[Decimal, TaxNumbers] | None = None
    for x, y in combinations(plain, 2):
        base, amount = (x, y) if abs(x.value) >= abs(y.value) else (y, x)
        gap = abs(_money(base.value * rate.value / 100) - amount.value)
        if best is None or gap < best[0]:
            best = (gap, TaxNumbers(rate, base, amount))
    return best[1] if best else None


def tax_gap(read: TaxNumbers) -> Decimal:
    """How far a tax row's printed amount is from its base x rate (rounded to cents)."""
    return abs(_money(read.base.value * read.rate.value / 100) - read.amount.value)


#: A line that opens with a position number before a word: "20. Papier copie A4, 80 g".
_POSITION_WORD = re.compile(r"\s*(\d{1,3})[.)]\s+[^\W\d_]")


def row_reading(printed: list[Printed]) -> ItemNumbers | None:
    """A row's numbers as quantity x price = amount: in print order where the amount
    follows its factors (:func:`parse_item_row`), else by
    arithmetic alone where a table prints its amount first or between them."""
    return parse_item_row(printed) or parse_item_row_any_order(printed)


def row_numbers(text: str, mark: str, space: bool) -> list[Printed]:
    """The numbers of a row's text but its position number, which is never its quantity,
    and numbers inside words (:func:`_in_word`):
    "20. Papier copie A4, 80 g" read as 20 x 4 = 80 (generated invoice 7123, whose
    stacked row below it then lost its description)."""
    return own_numbers(text, numbers_in(text, mark, space_groups=space))


def own_numbers(text: str, printed: Sequence[Printed]) -> list[Printed]:
    """:func:`row_numbers` of ``text`` whose numbers ``printed`` are already read."""
    printed = [p for p in printed if not _in_word(text, p)]
    position = _POSITION_WORD.match(text)
    if position and printed and printed[0].start == position.start(1):
        return printed[1:]
    return printed


def _in_word(text: str, p: Printed) -> bool:
    """Whether ``p`` is glued to the letters before it and so part of a word ("A4" of
    "Copy paper A4", "M8" of "Bolt M8"), unless those letters are a currency ("kr33")."""
    if p.start == 0 or not text[p.start - 1].isalpha():
        return False
    letters = re.search(r"[^\W\d_]+$", text[: p.start])
    word = letters.group() if letters else ""
    return not (word in CURRENCY_SYMBOLS or (word.isupper() and word in ISO_4217))


def cents_left_over(read: ItemNumbers, printed: list[Printed]) -> bool:
    """Whether ``read`` takes an amount without cents while the row prints an amount
    with cents it leaves out: "1  Abrechnungskreis 1  15.387,08  1  19 %" over
    "4012345001235  15.387,08" reads as 1 x 1 = 1 on its first line alone (the FeRD
    "Betriebskostenabrechnung" sample, whose amount is printed on the line below)."""
    used = {read.quantity.start, read.unit_price.start, read.line_amount.start}
    return read.line_amount.places == 0 and any(
        p.places == 2 and not p.percent and p.start not in used for p in printed
    )
