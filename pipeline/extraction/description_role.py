"""Whether a row's cell is in the description's role, not another part of the row.

A row's cells (:func:`pipeline.extraction.rows.row_cells`) are every run of words
between its numbers; the grammar offers them all, and a small model that picks the
wrong one writes a quantity with its unit or the words that label a number. Grounding
proves a description's place on its row (:func:`~pipeline.extraction.rows.
whole_description`); this proves its role, by three rules, each general:

* ``column``: where the nearest header above the row names a description column
  (:func:`pipeline.extraction.roles.column_role`), a cell that stands under another
  column (a quantity with its unit, "2 szt." under "Ilość") is none. The row's numbers
  may leave such a cell free: a position number equal to the quantity ("2" of
  "2  Opaski kablowe ... 2 szt.") reads as the quantity just as well.
* ``label``: a cell that ends on a header term of a number's role (quantity, price,
  amount, unit, rate: "quantity", "Preis", "i alt") printed right before one of the
  row's numbers is that number's label ("Coffee beans, quantity 42.111").
* ``price wording``: in running text (no column gap from the row's later factor to its
  amount) the item phrase comes before the price; what stands between that factor and
  the amount is wording ("each, totalling", "pr. stk., i alt", "per unit:").

Measured with the layout fuzzer's decoys (seeds 50000-51999): these cells were
accepted in 11 answers.
"""

from __future__ import annotations

import re

from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import Found
from pipeline.extraction.roles import column_role, column_roles
from pipeline.extraction.rows import COLUMN_GAP, Row

#: The roles whose header terms label a row's number, never its description.
_NUMBER_ROLES = frozenset({"quantity", "unit_price", "line_amount", "unit", "tax_rate"})
#: What may stand between a label and its number: spaces, a colon, an equals sign.
_LABEL_GAP = re.compile(r"[ :=]*")


def description_fault(doc: Layout, f: Found, row: Row) -> str | None:
    """Why the text at ``f`` (on ``row``'s line) is no description of ``row``, or None
    where no rule of this module refuses it."""
    line = f.line
    role = column_role(doc, row, line, f.start - line.start, f.end - line.start)
    if role is not None and role != "description":
        return f"it stands under the {role.replace('_', ' ')} column, not the description's"
    page = doc.pages[f.page - 1]
    label = _label_at_end(page[f.start : f.end])
    if label is not None:
        after = _LABEL_GAP.match(page, f.end)
        gap_end = after.end() if after else f.end
        if not COLUMN_GAP.search(page[f.end : gap_end]) and any(
            start == gap_end for start, _ in row.arithmetic()
        ):
            return f"it ends on {label!r}, the label of one of the row's numbers"
    read = row.read
    # the later factor: a reading may hold quantity and price swapped until roles prove them
    factors_end = row.first.start + max(read.quantity.end, read.unit_price.end)
    amount_start = row.first.start + read.line_amount.start
    if (
        factors_end <= f.start
        and f.end <= amount_start
        and not COLUMN_GAP.search(page[factors_end:amount_start])
    ):
        return "it stands between the row's price and amount, where running text words them"
    return None


def _label_at_end(text: str) -> str | None:
    """The header term of a number's role that ``text`` ends on, as printed, or None."""
    folded = text.casefold().rstrip(" :")
    if len(folded) > len(text):
        return None
    for term, role in column_roles().items():
        if role not in _NUMBER_ROLES or not folded.endswith(term):
            continue
        before = folded[: len(folded) - len(term)]
        if not before or not re.search(r"[^\W\d_]$", before):
            return text.rstrip(" :")[len(before) :]
    return None
