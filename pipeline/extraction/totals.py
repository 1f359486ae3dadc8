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
sum) are replaced where the gross is both sums' total (:func:`copied_totals`).
Two totals copied into each other's fields (the tax total as the gross and the gross
as the tax total: SmolLM2 on generated invoice 6006, 24 items) are exchanged under the
same conditions (:func:`swapped_totals`).

Anything else is left as the model gave it and the arithmetic rules report it: an
invoice whose own totals disagree (the off-by-a-cent trap) is never "repaired",
since no total of it holds another total's value.
"""

from __future__ import annotations

from decimal import Decimal

NET, TAX, GROSS = "net_total", "tax_total", "gross_total"


def copied_totals(
    net: Decimal | None,
    tax: Decimal | None,
    gross: Decimal | None,
    *,
    items_sum: Decimal | None,
    tax_lines_sum: Decimal | None,
    line_amounts: tuple[Decimal, ...] = (),
    tax_amounts: tuple[Decimal, ...] = (),
    tax_bases: tuple[Decimal, ...] = (),
) -> dict[str, Decimal]:
    """The totals to replace and their values; empty when nothing is certain.

    ``items_sum``/``tax_lines_sum``: the sums of the line amounts and of the tax lines'
    amounts as grounded (None where there are none); ``line_amounts``/``tax_amounts``:
    those amounts one by one, the parts a total may have been copied from (only where
    there are two or more: one part is the total itself); ``tax_bases``: the tax lines'
    bases, which the tax total may have been copied from too (as may a line amount:
    both are amounts the table and the breakdown print beside the tax).

    One total is replaced where the other two are right; the net and the tax both where
    the gross is right, i.e. the line amounts' sum plus the tax lines' sum (SmolLM2
    wrote the gross three times on generated invoice 2, 28 items).
    """
    if net is None or tax is None or gross is None or net + tax == gross:
        return {}
    if items_sum is None or tax_lines_sum is None:
        return {}
    lines = line_amounts if len(line_amounts) >= 2 else ()
    taxes = tax_amounts if len(tax_amounts) >= 2 else ()
    # Amounts printed in the table or the breakdown that are no tax: a copy of one of
    # them as the tax total is a copy, whatever their number.
    beside = (*line_amounts, *tax_bases)
    fixes: list[tuple[str, Decimal]] = []
    if tax in (net, gross, *taxes, *beside) and items_sum == net and tax_lines_sum == gross - net:
        fixes.append((TAX, gross - net))
    if gross in (net, tax) and items_sum == net and tax_lines_sum == tax:
        fixes.append((GROSS, net + tax))
    if net in (tax, gross, *lines) and items_sum == gross - tax and tax_lines_sum == tax:
        fixes.append((NET, gross - tax))
    if len(fixes) == 1:
        return dict(fixes)
    net_copied = net != items_sum and net in (tax, gross, *lines)
    tax_copied = tax != tax_lines_sum and tax in (net, gross, *taxes, *beside)
    if not fixes and net_copied and tax_copied and items_sum + tax_lines_sum == gross:
        return {NET: items_sum, TAX: tax_lines_sum}
    return {}


def swapped_totals(
    net: Decimal | None,
    tax: Decimal | None,
    gross: Decimal | None,
    *,
    items_sum: Decimal | None,
    tax_lines_sum: Decimal | None,
) -> tuple[str, str] | None:
    """The two totals the model copied into each other's fields, or None unless that is
    certain: exchanged, the net is the line amounts' sum, the tax the tax lines' sum and
    net + tax = gross, for exactly one pair of fields and not as the model gave them
    (net and tax exchanged still add up to the gross: only the sums tell them apart)."""
    if net is None or tax is None or gross is None:
        return None
    if items_sum is None or tax_lines_sum is None:
        return None

    def proven(v: dict[str, Decimal]) -> bool:
        return v[NET] == items_sum and v[TAX] == tax_lines_sum and v[NET] + v[TAX] == v[GROSS]

    given = {NET: net, TAX: tax, GROSS: gross}
    if proven(given):
        return None
    pairs = [
        (a, b)
        for a, b in ((NET, TAX), (NET, GROSS), (TAX, GROSS))
        if proven({**given, a: given[b], b: given[a]})
    ]
    return pairs[0] if len(pairs) == 1 else None
