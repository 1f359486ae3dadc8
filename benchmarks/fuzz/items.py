"""Line items as printed by the fuzzer: a table in any column order and header wording,
split over pages, or running text in several grammars.

Every item is one printed line whose whole text is the item's evidence span (key
``item:<index>``); the description, quantity, price and amount are the facts' values
in the invoice's number style, so the truth of each row is exact wherever its cells sit.
"""

from __future__ import annotations

import random
from decimal import Decimal
from string import Formatter

from benchmarks.fuzz import formats
from benchmarks.fuzz.facts import Facts, Item
from benchmarks.fuzz.layout import Layout
from benchmarks.fuzz.sheet import Row, Sheet, right_aligned
from benchmarks.fuzz.vocabulary import (
    COLUMNS,
    EMAIL_ITEM_GRAMMARS,
    choices,
    word,
)

GAP = "   "
_HEADER_INDEX = {"description": 1, "quantity": 2, "unit_price": 3, "amount": 4, "rate": 5}


def cells(item: Item, facts: Facts, layout: Layout) -> dict[str, str]:
    unit = f" {word(facts.language, 'unit')}" if layout.units else ""
    return {
        "description": item.description,
        "quantity": formats.quantity(item.quantity, facts) + unit,
        "unit_price": formats.amount(item.unit_price, facts),
        "amount": formats.amount(item.amount, facts),
        "rate": formats.rate(item.rate, facts),
    }


def _header(layout: Layout, facts: Facts) -> dict[str, str]:
    language = layout.header_language or facts.language
    words = choices(language, "abbr" if layout.headers == "abbr" else "headers")
    out = {column: words[i] for column, i in _HEADER_INDEX.items()}
    out["position"] = words[0]
    return out


def _table_rows(facts: Facts, layout: Layout) -> tuple[Row | None, list[Row]]:
    """The header row (None without one) and one row per item, columns aligned."""
    columns = ("position", *layout.columns)
    body = []
    for n, item in enumerate(facts.items, start=1):
        row = cells(item, facts, layout)
        row["position"] = str(n)
        body.append(row)
    header = _header(layout, facts) if layout.headers != "none" else None
    widths = {
        c: max([len(r[c]) for r in body] + ([len(header[c])] if header else [])) for c in columns
    }

    def line(values: dict[str, str]) -> str:
        parts = []
        for c in columns:
            left = c == "description"
            parts.append(values[c].ljust(widths[c]) if left else values[c].rjust(widths[c]))
        return GAP.join(parts).rstrip()

    rows = [Row(line(v)).whole(f"item:{i}") for i, v in enumerate(body)]
    return (Row(line(header)) if header else None), rows


def _subtotal(items: tuple[Item, ...]) -> Decimal:
    return sum((i.amount for i in items), Decimal(0))


def write_table(sheet: Sheet, facts: Facts, layout: Layout, title: Row) -> None:
    """The item table; with ``layout.pages`` split after half its rows (a one-item table
    ends its page), the next page repeating the invoice's title line and the header."""
    header, rows = _table_rows(facts, layout)
    if header is not None:
        sheet.add(header, Row("-" * len(header.text)))
    if not layout.pages:
        sheet.add(*rows)
        return
    cut = max(1, (len(rows) + 1) // 2)
    sheet.add(*rows[:cut])
    width = max(len(r.text) for r in rows)
    carried = formats.amount(_subtotal(facts.items[:cut]), facts)
    label = word(facts.language, "carried")
    sheet.add(*right_aligned([Row(f"{label}   {carried}")], width))
    sheet.lines("", word(facts.language, "page").format(p=1, n=2))
    sheet.new_page()
    sheet.add(title, Row(""))
    if cut < len(rows):
        sheet.add(*right_aligned([Row(f"{label}   {carried}")], width))
        if header is not None:
            sheet.add(header, Row("-" * len(header.text)))
        sheet.add(*rows[cut:])


def _fill(template: str, values: dict[str, str]) -> str:
    out = ""
    for literal, name, _spec, _conv in Formatter().parse(template):
        out += literal
        if name is not None:
            out += values[name]
    return out


def write_text_items(sheet: Sheet, facts: Facts, layout: Layout, rng: random.Random) -> None:
    """Items as running text: each item one line in a grammar drawn per invoice; with
    more than one tax rate the grammar prints each item's rate."""
    several_rates = len({i.rate for i in facts.items}) > 1
    if layout.items == "email":
        grammar = rng.choice(EMAIL_ITEM_GRAMMARS) + (" ({rate})" if several_rates else "")
    else:
        rated = choices(facts.language, "prose_rated")
        pool = rated if several_rates else (*choices(facts.language, "prose"), *rated)
        grammar = rng.choice(pool)
    for i, item in enumerate(facts.items):
        values = cells(item, facts, layout)
        values["desc"] = values["description"]
        values["qty"] = formats.quantity(item.quantity, facts)
        values["price"] = values["unit_price"]
        values["unit"] = word(facts.language, "unit")
        text = _fill(grammar, values)
        sheet.add(Row(text).whole(f"item:{i}"))


assert set(_HEADER_INDEX) == set(COLUMNS)
