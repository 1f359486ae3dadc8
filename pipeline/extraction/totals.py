"""Totals: a total the model copied into the wrong field, put right by the arithmetic.

A small model sometimes copies one printed total into another's field: in 2 of 60
answers the tax total was the gross ("tax":"10 531,97","gross":"10 531,97").
Validation would send such an invoice to review although the document is
consistent. Grounding fixes it only when the mistake is certain:

* the field holds the same value as another total (the model copied that one), or
  one of two or more parts of its own sum: one tax line's amount as the tax total
  (SmolLM2 on generated invoices 15, 102 items, and 9407: "VAT at 20% on
  208,181.18: 41,636.24" taken for "Total VAT: 43,088.42"), or another amount the
  table or the tax breakdown prints: a tax line's base or a row's amount as the tax
  total (SmolLM2 on eval invoice gen-13011: "Moms 12 % av 3 123,73: 374,85", the
  last row's amount too, taken for "Moms: 5 147,03");
* the value the field must then have is confirmed twice by independent sums of
  what grounding read from the rows (net = the line amounts, tax = the tax lines);
* that value is printed in the document, where the evidence then points
  (``match: "arithmetic"``), the occurrence under the field's label first.

Both the net and the tax total copied from the gross (or each from a part of its own
sum) are replaced where the gross is both sums' total. Two totals copied into each
other's fields (the tax total as the gross and the gross as the tax total: SmolLM2 on
generated invoice 6006, 24 items) are exchanged under the same conditions.

One constraint step decides all of these (:func:`repair`). The identities are data
(:data:`IDENTITIES`: the line amounts sum to the net, the tax lines to the tax,
net + tax = gross; :data:`LINE_IDENTITY`: base x rate = tax on each tax line), and so
are the repairs (:data:`REPAIRS`: which fields a repair replaces, from which amounts a
replaced value may have been copied, and the rule id it reports). A repair is certain
where every identity holds after it and held not before, every replaced value was a
copy (or, for an exchange, the other field's value), and no other repair of its rank
is certain too: two certain copies refuse each other rather than one being picked.
Grounding then places the new values where they are printed, or changes nothing.

Anything else is left as the model gave it and validation's identities refuse it
(``validation.net_total_mismatch``, ``validation.tax_total_mismatch``,
``validation.gross_total_mismatch``): an invoice whose own totals disagree (the
off-by-a-cent trap) is never "repaired", since no total of it holds another total's
value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Literal

NET, TAX, GROSS = "net_total", "tax_total", "gross_total"
#: The sums grounding read from the rows: the line amounts' and the tax lines' amounts.
ITEMS_SUM, TAX_LINES_SUM = "items_sum", "tax_lines_sum"
TOTALS = (NET, TAX, GROSS)
_CENT = Decimal("0.01")


@dataclass(frozen=True)
class Identity:
    """``sum(left) == sum(right)`` over the totals and the row sums."""

    left: tuple[str, ...]
    right: tuple[str, ...]


#: The identities an invoice's totals satisfy.
IDENTITIES: tuple[Identity, ...] = (
    Identity((ITEMS_SUM,), (NET,)),  # the line amounts sum to the net
    Identity((TAX_LINES_SUM,), (TAX,)),  # the tax lines sum to the tax
    Identity((NET, TAX), (GROSS,)),  # net + tax = gross
)
#: Per tax line: base x rate / 100 = amount, rounded half up to the cent. A tax line
#: that breaks it confirms no total.
LINE_IDENTITY = "base x rate / 100 = amount"

#: Where a replaced total may have been copied from: ``totals`` the other two totals,
#: ``parts`` one of two or more parts of its own sum, ``line_amounts``/``tax_bases``
#: the amounts the table and the breakdown print beside the tax, ``tax_amounts`` the
#: breakdown's tax amounts.
Source = Literal["totals", "parts", "line_amounts", "tax_bases", "tax_amounts"]
COPIED_FROM: Mapping[str, tuple[Source, ...]] = {
    # a tax line's base is a part of the net's sum too (SmolLM2 took the 7 % base 202,33
    # for the net 214,09 of FeRD's `XRECHNUNG_Reisekostenabrechnung`)
    NET: ("totals", "parts", "tax_bases"),
    TAX: ("totals", "parts", "line_amounts", "tax_bases"),
    # the totals written one field late: the net as the tax, the tax line's amount as
    # the gross (SmolLM2 on both FeRD `Betriebskostenabrechnung` renderings:
    # "tax":"15387,08","gross":"2923,55" for 15.387,08 + 2.923,55 = 18.310,63)
    GROSS: ("totals", "tax_amounts"),
}


@dataclass(frozen=True)
class Repair:
    """A change the step may make: ``copied`` replaces ``fields`` by what the identities
    give; ``exchanged`` exchanges the two ``fields``. ``rank``: repairs of a lower rank
    are tried first, and one of a rank is taken only where it is the only one certain."""

    rule: str
    kind: Literal["copied", "exchanged"]
    fields: tuple[str, ...]
    rank: int


REPAIRS: tuple[Repair, ...] = (
    Repair("totals.copied.net", "copied", (NET,), 0),
    Repair("totals.copied.tax", "copied", (TAX,), 0),
    Repair("totals.copied.gross", "copied", (GROSS,), 0),
    Repair("totals.copied.net_and_tax", "copied", (NET, TAX), 1),
    Repair("totals.copied.tax_and_gross", "copied", (TAX, GROSS), 1),
    Repair("totals.exchanged.net_tax", "exchanged", (NET, TAX), 2),
    Repair("totals.exchanged.net_gross", "exchanged", (NET, GROSS), 2),
    Repair("totals.exchanged.tax_gross", "exchanged", (TAX, GROSS), 2),
)


@dataclass(frozen=True)
class Rows:
    """What grounding read from the rows: the sums of the line amounts and of the tax
    lines' amounts (None where there are none), those amounts one by one (the parts a
    total may have been copied from: only where there are two or more, one part is the
    total itself), the tax lines' bases and rates (``rates`` empty: the line identity
    is not checked)."""

    items_sum: Decimal | None
    tax_lines_sum: Decimal | None
    line_amounts: tuple[Decimal, ...] = ()
    tax_amounts: tuple[Decimal, ...] = ()
    tax_bases: tuple[Decimal, ...] = ()
    rates: tuple[Decimal, ...] = ()

    def sums(self) -> dict[str, Decimal] | None:
        if self.items_sum is None or self.tax_lines_sum is None:
            return None
        return {ITEMS_SUM: self.items_sum, TAX_LINES_SUM: self.tax_lines_sum}

    def lines_hold(self) -> bool:
        """Whether every tax line satisfies :data:`LINE_IDENTITY`."""
        lines = zip(self.rates, self.tax_bases, self.tax_amounts, strict=False)
        return all(
            (base * rate / 100).quantize(_CENT, ROUND_HALF_UP) == amount
            for rate, base, amount in lines
        )

    def sources(self, field: str) -> dict[Source, tuple[Decimal, ...]]:
        parts = self.line_amounts if field == NET else self.tax_amounts
        return {
            "parts": parts if len(parts) >= 2 else (),
            "line_amounts": self.line_amounts,
            "tax_bases": self.tax_bases,
            "tax_amounts": self.tax_amounts,
        }


@dataclass(frozen=True)
class Fix:
    """A certain repair: its rule id and the totals' new values."""

    rule: str
    values: dict[str, Decimal]


def _holds(values: Mapping[str, Decimal], identities: tuple[Identity, ...] = IDENTITIES) -> bool:
    return all(
        sum((values[s] for s in i.left), Decimal(0))
        == sum((values[s] for s in i.right), Decimal(0))
        for i in identities
    )


#: The identities among the totals alone: a copy is looked for only where one fails
#: (a total holding another's value where the totals agree is their own business).
_AMONG_TOTALS = tuple(i for i in IDENTITIES if set(i.left + i.right) <= set(TOTALS))


def _solve(values: dict[str, Decimal | None]) -> dict[str, Decimal] | None:
    """The unknowns (None) each identity with one unknown gives, in :data:`IDENTITIES`'
    order; None where one stays unknown. The identities then check the result."""
    for _ in IDENTITIES:
        for i in IDENTITIES:
            unknown = [s for s in (*i.left, *i.right) if values[s] is None]
            if len(unknown) != 1:
                continue
            (u,) = unknown
            left = sum((v for s in i.left if (v := values[s]) is not None), Decimal(0))
            right = sum((v for s in i.right if (v := values[s]) is not None), Decimal(0))
            values[u] = right - left if u in i.left else left - right
    if any(v is None for v in values.values()):
        return None
    return {k: v for k, v in values.items() if v is not None}


def _copied(field: str, given: Mapping[str, Decimal], rows: Rows) -> bool:
    """Whether the model's value of ``field`` is a copy of an amount it may come from."""
    value = given[field]
    others = rows.sources(field)
    for source in COPIED_FROM[field]:
        pool = (
            tuple(given[t] for t in TOTALS if t != field) if source == "totals" else others[source]
        )
        if value in pool:
            return True
    return False


def _certain(repair: Repair, given: Mapping[str, Decimal], sums: Mapping[str, Decimal],
             rows: Rows) -> dict[str, Decimal] | None:  # fmt: skip
    """The repair's new values where it is certain, else None."""
    if repair.kind == "exchanged":
        a, b = repair.fields
        after: dict[str, Decimal] = {**given, **sums, a: given[b], b: given[a]}
    else:
        if _holds(given, _AMONG_TOTALS) or not all(_copied(f, given, rows) for f in repair.fields):
            return None
        unknown: dict[str, Decimal | None] = {**given, **sums}
        unknown.update(dict.fromkeys(repair.fields))
        solved = _solve(unknown)
        if solved is None or any(solved[f] == given[f] for f in repair.fields):
            return None
        after = solved
    if not _holds(after):
        return None
    return {f: after[f] for f in repair.fields}


def repair(
    net: Decimal | None,
    tax: Decimal | None,
    gross: Decimal | None,
    rows: Rows,
) -> Fix | None:
    """The one certain repair of the model's totals (the module's docstring), or None:
    nothing is certain and validation's identities report what is wrong."""
    sums = rows.sums()
    if net is None or tax is None or gross is None or sums is None or not rows.lines_hold():
        return None
    given = {NET: net, TAX: tax, GROSS: gross}
    if _holds({**given, **sums}):
        return None
    for rank in sorted({r.rank for r in REPAIRS}):
        found = [
            Fix(r.rule, values)
            for r in REPAIRS
            if r.rank == rank
            if (values := _certain(r, given, sums, rows)) is not None
        ]
        if len(found) == 1:
            return found[0]
        if len(found) > 1 and rank == 0:
            # Two single copies are certain: the pair is tried only where none is.
            return _after_copies(given, sums, rows)
    return None


def _after_copies(
    given: Mapping[str, Decimal], sums: Mapping[str, Decimal], rows: Rows
) -> Fix | None:
    """Where two copies refuse each other, an exchange may still be certain."""
    found = [
        Fix(r.rule, values)
        for r in REPAIRS
        if r.kind == "exchanged"
        if (values := _certain(r, given, sums, rows)) is not None
    ]
    return found[0] if len(found) == 1 else None
