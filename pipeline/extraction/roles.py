"""Roles of a row's numbers: which factor is the quantity and which the unit price, proven.

Arithmetic proves a row's sum, not its roles: ``3 x 12,50 = 37,50`` reads as well as
``12,50 x 3``, so a table that prints its unit price before its quantity was read with
the two exchanged and accepted (issue 41: six invoices of one unseen layout family,
every item wrong, every sum right). A row's reading (:func:`pipeline.extraction.numbers.
parse_item_row`, print order) is therefore kept only where something printed says which
factor is which:

* the table's **column header**: the nearest header line above the row whose cells name
  a quantity and a unit price (:data:`COLUMN_ROLES`, a lexicon kept as data in
  ``lexicon/column_roles.json``); the order of those two cells is the order of the two
  factors in every row under it;
* a **unit** printed right after one factor ("3 pcs", "35,5 h", "1.149 parole") marks the
  quantity;
* a **currency** sign or code beside one factor ("3,87 SEK", "€ 12.50"), a per-unit mark
  after it ("12,50/h", "179.04 each") or a price word before it ("@ 4.50", "à 6,58",
  "zu je 0,169", "po 2,74") marks the unit price;
* equal factors need no proof (both readings give the same item).

Where those marks agree, the reading follows them (exchanging the factors where they
say the price is printed first); where they disagree or none exists, the row is
:attr:`Verdict.AMBIGUOUS` and grounding refuses it with ``ambiguous_role``: review,
never a pick (ARCHITECTURE rule 18). Position in the line is never a role.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import NamedTuple

from pipeline.extraction.labels import is_unit
from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.row_arithmetic import ItemNumbers, to_cents
from pipeline.extraction.rows import COLUMN_GAP, Row
from pipeline.invoice import CURRENCY_SYMBOLS, ISO_4217, Printed, numbers_in

#: Roles a column header names (the lexicon's keys).
QUANTITY, UNIT_PRICE = "quantity", "unit_price"
#: How far above a row its header may stand, in lines (a long table on one page).
HEADER_REACH = 120
#: Words printed right before a unit price ("@ 4.50", "à 6,58", "zu je 0,169", "po 2,74").
PRICE_BEFORE = frozenset(
    ("@", "à", "a", "á", "at", "je", "zu je", "po", "per", "por", "pro", "til", "for", "x@")
)
#: Words printed right after a unit price ("each", "l'unité", "la unidad", "za sztukę").
PRICE_AFTER = frozenset(
    ("each", "ea", "ea.", "l'unité", "la pièce", "la unidad", "cada", "cadauno", "cad.",
     "per unit", "per piece", "per item", "per stuk", "per styck", "pro stück", "je stück",
     "za sztukę", "za szt.", "por unidad", "pour une", "l'unità")
)  # fmt: skip


class Verdict(StrEnum):
    #: The reading's quantity and price are proven as read.
    AS_READ = "as_read"
    #: The marks prove the price is printed where the reading put the quantity.
    SWAPPED = "swapped"
    #: Nothing proves which factor is which, or two marks contradict each other.
    AMBIGUOUS = "ambiguous"


class Proof(NamedTuple):
    verdict: Verdict
    #: What proved it ("header", "unit", "currency", "equal"), or why not.
    why: str


@cache
def column_roles() -> dict[str, str]:
    """Folded header term -> role; a term listed under two roles proves neither."""
    raw = json.loads(
        resources.files("pipeline.extraction").joinpath("lexicon/column_roles.json").read_text()
    )
    roles: dict[str, str] = {}
    clash: set[str] = set()
    for role, terms in raw.items():
        if role.startswith("_"):
            continue
        for term in terms:
            term = term.casefold()
            if roles.get(term, role) != role:
                clash.add(term)
            roles[term] = role
    return {t: r for t, r in roles.items() if t not in clash}


#: Lexicon terms as one alternation, longest first, bounded by non-letters.
@cache
def _terms() -> re.Pattern[str]:
    alternatives = sorted(column_roles(), key=len, reverse=True)
    body = "|".join(re.escape(t) for t in alternatives)
    return re.compile(rf"(?<![^\W\d_])(?:{body})(?![^\W\d_])")


class HeaderCell(NamedTuple):
    start: int  # offsets of the term in the line
    end: int
    role: str
    column: int  # bars ("|") before it; -1 where the header prints none


#: Which role a header cell takes when it holds terms of several ("Prijs per eenheid":
#: a price per unit; "VAT amount": an amount; "Qty/Unit": a quantity).
_CELL_PRIORITY = ("unit_price", "line_amount", QUANTITY, "tax_rate", "unit", "description")
#: The roles whose columns hold a row's arithmetic.
_NUMERIC = frozenset({QUANTITY, UNIT_PRICE, "line_amount"})


def header_cells(text: str) -> list[HeaderCell]:
    """The roles a line names as a column header, in print order, or [] where it is no
    header: at least two cells with roles, one of them a quantity or a unit price, and
    no token with a digit (a header prints words, its rows print numbers).

    A cell is a run of words between column gaps (two spaces, a tab, a bar) and takes
    one role: where it holds terms of several, by :data:`_CELL_PRIORITY`; a run that
    names two of quantity, price and amount (a header set with single spaces) is read
    term by term instead."""
    if re.search(r"\d", text) or len(text) > 400:
        return []
    folded = text.casefold()
    if len(folded) != len(text):
        return []  # a fold that changes length would shift positions: no proof
    bars = "|" in text
    cells: list[HeaderCell] = []
    for run in re.finditer(r"[^\s|]+(?: [^\s|]+)*", text):
        terms = [
            (run.start() + m.start(), run.start() + m.end(), column_roles()[m.group()])
            for m in _terms().finditer(folded[run.start() : run.end()])
        ]
        if not terms:
            continue
        column = text.count("|", 0, run.start()) if bars else -1
        roles = {role for _, _, role in terms}
        if len(roles & _NUMERIC) > 1:
            cells += [HeaderCell(a, b, role, column) for a, b, role in terms]
            continue
        role = next((r for r in _CELL_PRIORITY if r in roles), terms[0][2])
        cells.append(HeaderCell(run.start(), run.end(), role, column))
    roles = {c.role for c in cells}
    if len(cells) < 2 or not roles & {QUANTITY, UNIT_PRICE}:
        return []
    return cells


@per_layout
def _headers(doc: Layout) -> tuple[tuple[int, tuple[HeaderCell, ...]], ...]:
    """Every header line of the document: (line number, its cells)."""
    out = []
    for line in doc.lines:
        if not line.text.strip():
            continue
        cells = header_cells(line.text)
        if cells:
            out.append((line.number, tuple(cells)))
    return tuple(out)


def _header_order(doc: Layout, row: Row, read: ItemNumbers) -> Verdict | None:
    """What the nearest header above ``row`` says of its factors: AS_READ or SWAPPED where
    one factor stands under its quantity column and the other under its unit-price
    column, AMBIGUOUS where the header names both columns but the factors stand under
    others (a position number read as a quantity), None where no header names both."""
    above = [(n, cells) for n, cells in _headers(doc) if n < row.first.number]
    if not above:
        return None
    number, cells = above[-1]
    if row.first.number - number > HEADER_REACH:
        return None
    if sum(c.role == QUANTITY for c in cells) != 1 or sum(c.role == UNIT_PRICE for c in cells) != 1:
        return None
    q_role = _column_role(cells, *_line_of(doc, row, read.quantity))
    p_role = _column_role(cells, *_line_of(doc, row, read.unit_price))
    if (q_role, p_role) == (QUANTITY, UNIT_PRICE):
        return Verdict.AS_READ
    if (q_role, p_role) == (UNIT_PRICE, QUANTITY):
        return Verdict.SWAPPED
    return Verdict.AMBIGUOUS


def column_role(doc: Layout, row: Row, line: Line, start: int, end: int) -> str | None:
    """The role of the column that text at ``start:end`` of ``line`` (on ``row``) stands
    under, by the nearest header above the row that names a description column, or None
    where no such header reaches the row or no one column holds the text."""
    above = [(n, cells) for n, cells in _headers(doc) if n < row.first.number]
    if not above or row.first.number - above[-1][0] > HEADER_REACH:
        return None
    cells = above[-1][1]
    if not any(c.role == "description" for c in cells):
        return None
    return _column_role(cells, line, start, end)


#: How far (characters) a number may stand from the header term it sits under.
COLUMN_SLACK = 8


def _column_role(cells: tuple[HeaderCell, ...], line: Line, start: int, end: int) -> str | None:
    """The role of the header cell a number at ``start:end`` of ``line`` stands under: by
    the bars before it where header and row print bars, else by the nearest term (one
    nearest, within :data:`COLUMN_SLACK`)."""
    if cells[0].column >= 0 and "|" in line.text:
        index = line.text.count("|", 0, start)
        roles = {c.role for c in cells if c.column == index}
        return roles.pop() if len(roles) == 1 else None

    def distance(c: HeaderCell) -> int:
        return 0 if c.start < end and c.end > start else min(abs(start - c.end), abs(c.start - end))

    ranked = sorted(cells, key=distance)
    best = distance(ranked[0])
    if best > COLUMN_SLACK or (len(ranked) > 1 and distance(ranked[1]) == best):
        return None
    return ranked[0].role


def _line_of(doc: Layout, row: Row, number: Printed) -> tuple[Line, int, int]:
    """The line a factor is printed on and its offsets there (a stacked row spans lines)."""
    at = row.first.start + number.start
    line = doc.line_at(row.first.page, at)
    return line, at - line.start, at - line.start + (number.end - number.start)


def _words_after(text: str, end: int) -> list[str]:
    """The two tokens right after offset ``end`` in the same cell, folded ([] at a column
    gap)."""
    rest = text[end:]
    if COLUMN_GAP.match(rest):
        return []
    cell = COLUMN_GAP.split(rest, maxsplit=1)[0]
    return [token.casefold() for token in cell.split()[:2]]


def _words_before(text: str, start: int) -> list[str]:
    """The two tokens right before offset ``start`` in the same cell, as printed ([]
    where a letter touches the number: the "A" of "A4" is no word before it)."""
    if start > 0 and text[start - 1].isalpha():
        return []
    left = COLUMN_GAP.split(text[:start])[-1]
    return left.split()[-2:]


def _is_currency(token: str) -> bool:
    """A currency sign ("€", "kr", "zł") or an upper-case ISO 4217 code ("SEK")."""
    token = token.strip(".,:;()")
    return bool(token) and (token in CURRENCY_SYMBOLS or (token.isupper() and token in ISO_4217))


def _marks(text: str, start: int, end: int) -> tuple[bool, bool]:
    """(marked as a quantity, marked as a unit price) for the number at ``start:end``."""
    following = _words_after(text, end)
    after = following[0] if following else ""
    phrase = " ".join(following).strip(".,:;")
    glued = re.match(r"[^\W\d_]+", text[end:])  # "5h", "20Stk", "12EUR"
    before = _words_before(text, start)
    last = before[-1] if before else ""
    per_unit = after.startswith("/") or after.strip(".,:;") in PRICE_AFTER or phrase in PRICE_AFTER
    # "each" is a unit word too ("3 each"), but after a price it says "per unit"
    unit = (is_unit(after) and not per_unit) or (glued is not None and is_unit(glued.group()))
    currency_near = _is_currency(after) or _is_currency(last) or _currency_glued(text, start, end)
    price_word = last.casefold() in PRICE_BEFORE or " ".join(before).casefold() in PRICE_BEFORE
    return unit, currency_near or per_unit or price_word


def _currency_glued(text: str, start: int, end: int) -> bool:
    """A sign glued to the number ("€12.50", "12,50€", "kr33")."""
    before = text[max(0, start - 3) : start].split()
    after = text[end : end + 3].split()
    near = [before[-1][-1:] if before and text[start - 1 : start].strip() else ""]
    near += [after[0][:1] if after and text[end : end + 1].strip() else ""]
    return any(n in CURRENCY_SYMBOLS for n in near if n)


def _marks_order(doc: Layout, row: Row, read: ItemNumbers) -> Verdict | None:
    """What units, currencies and price words beside the two factors say; None: nothing."""
    q_line, q_start, q_end = _line_of(doc, row, read.quantity)
    p_line, p_start, p_end = _line_of(doc, row, read.unit_price)
    q_qty, q_price = _marks(q_line.text, q_start, q_end)
    p_qty, p_price = _marks(p_line.text, p_start, p_end)
    as_read = p_price or q_qty
    swapped = q_price or p_qty
    if as_read and not swapped:
        return Verdict.AS_READ
    if swapped and not as_read:
        return Verdict.SWAPPED
    return Verdict.AMBIGUOUS if as_read and swapped else None


_OFF_COLUMN = "the factors stand under no quantity and price columns"


def _reading_under_columns(doc: Layout, row: Row) -> ItemNumbers | None:
    """The one reading of ``row``'s amount whose two factors stand under the header's
    quantity and unit-price columns (either way round), or None."""
    above = [(n, cells) for n, cells in _headers(doc) if n < row.first.number]
    if not above:
        return None
    cells = above[-1][1]
    page = doc.pages[row.first.page - 1]
    printed = numbers_in(page[row.first.start : row.end], doc.mark, space_groups=doc.space)
    amount = row.read.line_amount
    roles = {QUANTITY, UNIT_PRICE}
    found = []
    for i, q in enumerate(printed):
        for p in printed[i + 1 :]:
            if q.percent or p.percent or amount in (q, p):
                continue
            if to_cents(q.value * p.value) != amount.value:
                continue
            candidate = ItemNumbers(q, p, amount, row.read.rate, True)
            placed = {_column_role(cells, *_line_of(doc, row, n)) for n in (q, p)}
            if placed == roles:
                found.append(candidate)
    return found[0] if len(found) == 1 else None


def prove_roles(doc: Layout, row: Row) -> Proof:
    """Whether ``row``'s reading has its quantity and unit price the right way round."""
    read = row.read
    if read.quantity.value == read.unit_price.value:
        return Proof(Verdict.AS_READ, "equal")
    header = _header_order(doc, row, read)
    marks = _marks_order(doc, row, read)
    if header is Verdict.AMBIGUOUS:
        return Proof(Verdict.AMBIGUOUS, _OFF_COLUMN)
    if marks is Verdict.AMBIGUOUS:
        return Proof(Verdict.AMBIGUOUS, "units or currencies mark both factors")
    if header is not None and marks is not None and header != marks:
        return Proof(Verdict.AMBIGUOUS, "the column header and the row's marks disagree")
    if header is not None:
        return Proof(header, "header")
    if marks is not None:
        return Proof(marks, "marks")
    return Proof(Verdict.AMBIGUOUS, "no column header, unit or currency says which is which")


def proven_numbers(doc: Layout, row: Row) -> tuple[ItemNumbers, Proof]:
    """``row``'s numbers with quantity and price as proven (exchanged where the proof says
    the price is printed first), and the proof. Where the reading's factors stand under
    other columns than the header's quantity and price (a position number read as the
    quantity, "1  Freight  168.57  168.57  1 pcs"), the one other reading of the same
    amount whose factors stand under those columns is taken, if there is exactly one."""
    proof = prove_roles(doc, row)
    if proof.why == _OFF_COLUMN:
        other = _reading_under_columns(doc, row)
        if other is not None:
            row = Row(row.first, row.end, other)
            second = prove_roles(doc, row)
            if second.verdict is not Verdict.AMBIGUOUS:
                proof = Proof(second.verdict, "header, the factors read under their columns")
    read = row.read
    if proof.verdict is Verdict.SWAPPED:
        read = ItemNumbers(read.unit_price, read.quantity, read.line_amount, read.rate, read.exact)
    return read, proof
