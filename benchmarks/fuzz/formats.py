"""How the fuzzer prints numbers and dates: the invoice's own decimal mark and grouping,
dates as the language writes them in figures or in words (the fuzzer's own month
names: Babel's locale data is not safe to load beside ``pipeline.validation.dates``,
which caches unmerged CLDR data under the key Babel's formatters read).

Each function is exact in one direction: the printed string reads back to the value
it was made from (a price keeps every decimal it has, at least two), so the truth
built from the values is what the text shows.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from benchmarks.fuzz.facts import Facts
from benchmarks.fuzz.vocabulary import word


def _number(value: Decimal, places: int, facts: Facts) -> str:
    sign = "-" if value < 0 else ""
    text = f"{abs(value):.{places}f}"
    whole, _, frac = text.partition(".")
    if facts.group and len(whole) > 3:
        groups: list[str] = []
        while len(whole) > 3:
            groups.insert(0, whole[-3:])
            whole = whole[:-3]
        whole = facts.group.join([whole, *groups])
    return sign + whole + (facts.decimal + frac if frac else "")


def _places(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def amount(value: Decimal, facts: Facts) -> str:
    """A money amount: two decimals, more where the value has them (a price of 1.673)."""
    return _number(value, max(2, _places(value)), facts)


def quantity(value: Decimal, facts: Facts) -> str:
    """A quantity with exactly the decimals it has (``3``, ``13,5``, ``53,169``)."""
    return _number(value, _places(value), facts)


def rate(value: Decimal, facts: Facts, spaced: bool = False) -> str:
    return quantity(value, facts) + (" %" if spaced else "%")


def in_figures(day: date, language: str) -> str:
    return word(language, "date").format(d=day.day, m=day.month, y=day.year)


def in_words(day: date, language: str) -> str:
    """The long form ("3 de março de 2026", "3. März 2026"; Polish months in the genitive)."""
    month = word(language, "months").split()[day.month - 1]
    return word(language, "long_date").format(d=day.day, month=month, y=day.year)
