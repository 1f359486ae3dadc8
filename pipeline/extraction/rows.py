"""Line-item rows: where a row's numbers are, and which printed text is its description.

One reading serves two ends, so they can never disagree:

* the grammar (:func:`pipeline.extraction.answer.answer_schema`) offers a model only
  the descriptions :func:`description_cells` finds, whole and as printed, so a small
  model cannot shorten ("Service" for "Service av värmeanläggning"), extend over a
  column or invent a description;
* grounding (:mod:`pipeline.extraction.grounding`) places an item on the row whose
  line shows its description (:func:`whole_description`) and reads its numbers by
  arithmetic (:func:`read_row`).

Where the rows add up to the printed net (:func:`pipeline.extraction.table.whole_table`),
the grammar asks the items row by row, each position offering only its own row's cells
(:func:`item_cells`).

Measured on 2,100 clean generated invoices (seeds 0-1499 and 5000-5599, 1-8 items,
every language and layout), 1,000 with up to 3 items (seeds 9000-9999) and 100 with
up to 40 (seeds 7000-7099): every true description is among the cells; 7.8, 4.4 and
11.4 cells per invoice on average (10.6, 6.0 and 18.1 before the connective rule of
:func:`connective_runs` and the position numbers).

One concept over 450 lines: a row's reading and its cells decide each other (a row
stops at a line whose cells describe itself; cells are bounded by the row's numbers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from pipeline.extraction.labels import JOINING_WORDS, is_unit
from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.locate import Found
from pipeline.extraction.row_arithmetic import (
    ItemNumbers,
    cents_left_over,
    own_numbers,
    row_numbers,
    row_reading,
)
from pipeline.extraction.tax_columns import tax_rows
from pipeline.invoice import CURRENCY_SYMBOLS, ISO_4217, Printed

#: Column separators: two spaces or more, a tab, a bar.
COLUMN_GAP = re.compile(r"\s{2,}|\t|\|")
#: Words this short next to a description are units and connectives ("pcs", "à", "zu je").
_SHORT_WORD = 4
_PUNCTUATION = ".,:;()[]•*-–·'\"@"
#: A letter (a word character that is neither a digit nor "_").
_LETTER = re.compile(r"[^\W\d_]")
#: A row's position number at the start of its line: "1.", "12)".
_POSITION = re.compile(r"\d{1,3}[.)]")
#: The longest description a cell may be, in words (a bound on the enumeration).
_MAX_CELL_WORDS = 16


class Row(NamedTuple):
    """A line item's row: its first line, its end offset in the page and its numbers
    as read (offsets relative to the first line's start)."""

    first: Line
    end: int
    read: ItemNumbers

    @property
    def key(self) -> tuple[int, int]:
        """Where the row's amount is printed (page, offset): two items are two rows only
        if their amounts are printed in two places."""
        return (self.first.page, self.first.start + self.read.line_amount.start)

    def arithmetic(self) -> list[tuple[int, int]]:
        """Page offsets of the numbers the row's arithmetic uses (quantity, price, amount,
        rate)."""
        read = self.read
        return [
            (self.first.start + p.start, self.first.start + p.end)
            for p in (read.quantity, read.unit_price, read.line_amount, read.rate)
            if p is not None
        ]


@per_layout  # the grammar reads every line's row, grounding the cited ones again
def read_row(doc: Layout, number: int) -> Row | None:
    """The row starting at line ``number``, extended over the next lines while its
    numbers do not add up (a stacked row prints its description above its numbers);
    None when no reading exists.

    A row never extends over a line that is a row with a description of its own: the
    column header above a one-row table ("Service | Quantity | Rate") is no row, where
    it once read as one and took the item's numbers a second time.
    """
    first = doc.line(number)
    if first is None:
        return None
    page = doc.pages[first.page - 1]
    last = first
    seen = 0  # plain numbers in the lines taken so far
    whole: Row | None = None  # an exact reading whose amount has no cents beside one that has
    for _ in range(3):
        if last is first:
            printed = own_numbers(first.text, doc.numbers_on(first))
        else:
            printed = row_numbers(page[first.start : last.end], doc.mark, doc.space)
        read = row_reading(printed)
        if read is not None and read.exact:
            if whole is None and cents_left_over(read, printed):
                whole = Row(first, last.end, read)
            elif whole is None or read.line_amount.places == 2:
                return Row(first, last.end, read)
        plain = sum(1 for p in printed if not p.percent)
        on_last = last.start - first.start
        if (
            read is not None
            and not read.exact
            and whole is None
            and (
                seen < 3 <= plain
                or all(
                    n.start >= on_last for n in (read.quantity, read.unit_price, read.line_amount)
                )
            )
        ):
            # The row's numbers just became complete (the cited line alone, or a stacked
            # row's number line below a description that prints numbers of its own,
            # "8. Copy paper A4, 80 g"): read as printed, never borrow the next row's.
            return Row(first, last.end, read)
        seen = plain
        nxt = doc.line(last.number + 1)
        if nxt is None or nxt.page != first.page or _describes_itself(doc, nxt):
            break
        last = nxt
    return whole


def _is_quantity(row: Row, start: int, stop: int) -> bool:
    """Whether the row's quantity is printed between page offsets ``start`` and ``stop``
    (a position number, "1. Freight and packaging", has no unit after it)."""
    q = row.read.quantity
    return row.first.start + q.start < stop and row.first.start + q.end > start


def _own_row(doc: Layout, line: Line) -> Row | None:
    """The row a line reads as by its own numbers alone."""
    read = row_reading(own_numbers(line.text, doc.numbers_on(line)))
    return Row(line, line.end, read) if read is not None else None


@per_layout
def _describes_itself(doc: Layout, line: Line) -> bool:
    """Whether ``line`` is a row by its own numbers and prints a description too: a
    cell with a word of more than four letters that is not a quantity's unit (a stacked
    row's number line, "5 pcs x 211,59 = 1.057,95 (Tax 20%)", has none)."""
    row = _own_row(doc, line)
    if row is None:
        return False
    for start, end in _iter_line_cells(doc, line, row):  # the first such cell decides
        words = line.text[start - line.start : end - line.start].split()
        if _after_number(line.text[: start - line.start]):
            words = words[1:]  # "words x 0,098": the quantity's unit
        if any(_long_word(w) for w in words):
            return True
    return False


#: A word of letters, which may join parts with an apostrophe or a hyphen ("Main-d'œuvre").
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _long_word(word: str) -> bool:
    """Whether ``word`` is a word of letters longer than a unit or a connective."""
    core = word.strip(_PUNCTUATION)
    return _WORD.fullmatch(core) is not None and len(_LETTER.findall(core)) > _SHORT_WORD


def whole_description(doc: Layout, f: Found, row: Row) -> bool:
    """Whether ``f`` is a row's whole description, not a part of it ("Service" in
    "1 st Service av värmeanläggning à 421,93") and not more: :func:`_bounded` and
    it does not end among the words its table prints before one of the row's numbers
    (:func:`connective_runs`)."""
    return (
        _bounded(doc, f, row)
        and not _ends_among_connectives(doc, f.page, f.end, row)
        and not _in_price_wording(doc, f.page, f.start, f.end, row)
    )


def _ends_among_connectives(doc: Layout, page: int, end: int, row: Row) -> bool:
    runs = connective_runs(doc)
    for start, _ in row.arithmetic():
        run = runs.get((page, start))
        if run is not None and run < end <= start:
            return True  # "Kawa ziarnista po" of "... po 14,93": the table's "po"
    return False


def _bounded(doc: Layout, f: Found, row: Row) -> bool:
    """Whether between ``f`` and the nearest boundary on each side stand only words that
    join a row's parts (:func:`_joining`: "à", "zu je", "x", a unit, a currency).

    Boundaries are the line's ends, column gaps, "|", and the row's own arithmetic
    (quantity, price, amount, rate); on the left also a number that opens the line (a
    position, an article number). Any other number is the description's own: "80 g" of
    "Papier copie A4, 80 g" does not start after "A4," and "Stahlwinkel 40" of
    "Stahlwinkel 40 mm" does not end before a unit (the layout fuzzer's decoy answers
    were accepted with both).
    """
    page = doc.pages[f.page - 1]
    inside = page[f.start : f.end].split()
    if inside and any(w == w.casefold() and w in JOINING_WORDS for w in (inside[0], inside[-1])):
        return False  # "x Café en grano a", "labour @": a row's joining words, no description's
    left = COLUMN_GAP.split(page[f.line.start : f.start])[-1]
    at = f.start - len(left)  # page offset of ``left``
    arithmetic = row.arithmetic()
    numbers = [  # the row's own numbers, or one that opens its line (a position, an article)
        m
        for m in re.finditer(r"\S*\d\S*", left)
        if not page[f.line.start : at + m.start()].strip()
        or any(a < at + m.end() and b > at + m.start() for a, b in arithmetic)
    ]
    words = left[numbers[-1].end() :].split() if numbers else left.split()
    if numbers and _is_quantity(row, at + numbers[-1].start(), f.start):
        words = words[1:]  # the quantity's unit, whatever its length ("Wörter")
    stop = min([start for start, _ in row.arithmetic() if start >= f.end] + [f.line.end])
    right = COLUMN_GAP.split(page[f.end : stop])[0]
    if page[f.start : f.end][-1:].isdigit() and right.split() and is_unit(right.split()[0]):
        return False  # "Stahlwinkel 40" of "Stahlwinkel 40 mm": a measure, not a boundary
    words += right.split()
    return all(_joining(w) for w in words) and not any(ch.isdigit() for ch in right)


def _joining(word: str) -> bool:
    """Whether ``word`` may stand between a description and its cell's edge: punctuation,
    a currency, or a short word that joins a row's parts ("à", "zu je", "x", "(VAT"),
    never a word of a description ("Copy" of "Copy paper A4", "fuel" of "Diesel fuel",
    "woord" of "Vertaling, per woord": a unit is the quantity's only right after it)."""
    core = word.strip(_PUNCTUATION + "=×x%")
    if not core or core.casefold() in JOINING_WORDS:
        return True
    return core in CURRENCY_SYMBOLS or (core.isupper() and core in ISO_4217)


_SLOTS = ("quantity", "unit_price", "line_amount", "rate")


def _short_run(text: str, stop: int) -> list[tuple[int, str]]:
    """The short words (:data:`_SHORT_WORD` letters or fewer, no digit) printed right
    before offset ``stop`` of ``text``, with no column gap among them or before
    ``stop``: (offset, casefolded word), nearest last."""
    run: list[tuple[int, str]] = []
    end = stop
    for m in reversed(list(re.finditer(r"\S+", text[:stop]))):
        word = m.group()
        if COLUMN_GAP.search(text[m.end() : end]) or any(ch.isdigit() for ch in word):
            break
        if len(word.strip(_PUNCTUATION)) > _SHORT_WORD:
            break
        run.insert(0, (m.start(), word.casefold()))
        end = m.start()
    return run


def _word_before(doc: Layout, page: int, offset: int) -> str:
    """The word printed right before page offset ``offset`` on its line ("" if none)."""
    text = doc.pages[page - 1]
    words = text[text.rfind("\n", 0, offset) + 1 : offset].split()
    return words[-1].casefold() if words else ""


@per_layout
def connective_runs(doc: Layout) -> dict[tuple[int, int], int]:
    """Where the table prints the same short words before one of its rows' numbers:
    (page, offset of the number) -> page offset where those words begin.

    A row printed as a sentence puts words between its numbers ("32,315 kg Kawa
    ziarnista po 14,93", "8.568 Wörter Übersetzung zu je 0,169", "5 pcs x 211,59 =
    1.057,95 (VAT 20%)"). Short words next to a description do not make it a part
    (:func:`whole_description`), so "Kawa ziarnista po" read as whole, and a model
    that copied it was accepted with it. The words that stand directly before the
    same number (quantity, price, amount or rate) on every row of a table of two or
    more rows, as the longest run they share, belong to the table, not to any
    description: no description ends among them. One row alone proves nothing (its
    description may end on a short word: "Cable tie 4,50"), nor do words that differ
    from row to row, nor words after which every row prints the same word again (one
    description repeated: "Steel bracket 40 mm at" on three rows).
    """
    # each row as read from the line nearest its amount: the line its numbers are on
    table = [starts[-1] for starts in rows_by_amount(doc)]
    runs: dict[tuple[int, int], int] = {}
    for slot in _SLOTS:
        found: list[tuple[int, int, list[tuple[int, str]]]] = []  # page, number, run
        for row in table:
            number: Printed | None = getattr(row.read, slot)
            if number is None or number.start >= len(row.first.text):
                continue  # a stacked row's number below its first line
            at = row.first.start  # the run's offsets, in the page
            run = [(at + a, w) for a, w in _short_run(row.first.text, number.start)]
            found.append((row.first.page, at + number.start, run))
        if len(found) < 2:
            continue
        shared = 0
        while all(len(run) > shared for _, _, run in found) and (
            len({run[-1 - shared][1] for _, _, run in found}) == 1
        ):
            shared += 1
        if not shared:
            continue
        # What stands before the shared words must differ somewhere: rows that print
        # the same thing before them ("Steel bracket 40 mm at" on every row) may be one
        # description repeated, whose own last words these are.
        before = {_word_before(doc, page, run[-shared][0]) for page, _, run in found}
        if len(before) > 1:
            for page, number_at, run in found:
                runs[(page, number_at)] = run[-shared][0]
    return runs


def _line_cells(doc: Layout, line: Line, row: Row) -> list[tuple[int, int]]:
    """Page offsets of every cell of ``line`` under ``row``'s arithmetic (see
    :func:`description_cells`); a lone word right after a number is the number's
    unit ("pcs", "words"), never a cell, no cell starts on a known unit
    (:data:`~pipeline.extraction.labels.UNIT_WORDS`) right after a number, and none
    ends among the words the table prints before a number (:func:`connective_runs`)."""
    return [
        (at, to)
        for at, to in _iter_line_cells(doc, line, row)
        if not _ends_among_connectives(doc, line.page, to, row)
        and not _in_price_wording(doc, line.page, at, to, row)
    ]


@per_layout
def price_wording(doc: Layout) -> dict[tuple[int, int], int]:
    """Where every row prints the same words between its price and amount ("à 6,58
    l'unité : 243,46"): :attr:`Row.key` -> page offset where the price ends. Those words
    are the table's, no description (as a cell they made all 78 rows of 10 French
    running-text invoices of seeds 0-599 a choice, shown and asked): only for two rows
    or more, each with price and amount on one line, the same words with a letter, and
    a cell outside them (rows that print nothing else keep them)."""
    table = [starts[-1] for starts in rows_by_amount(doc)]
    spans: dict[tuple[int, int], int] = {}
    wording: set[str] = set()
    for row in table:
        price, amount = row.read.unit_price, row.read.line_amount
        if amount.start >= len(row.first.text) or price.end > amount.start:
            return {}
        wording.add(" ".join(row.first.text[price.end : amount.start].casefold().split()))
        spans[row.key] = row.first.start + price.end
    if len(spans) < 2 or len(wording) != 1 or not _LETTER.search(wording.pop()):
        return {}
    for row in table:
        cells = _iter_line_cells(doc, row.first, row)
        page, amount_at = row.key
        kept = [c for c in cells if not _ends_among_connectives(doc, page, c[1], row)]
        if all(at >= spans[row.key] and to <= amount_at for at, to in kept):
            return {}
    return spans


def _in_price_wording(doc: Layout, page: int, at: int, to: int, row: Row) -> bool:
    """Whether page offsets ``at``..``to`` lie in the words ``row``'s table prints
    between every row's price and amount (:func:`price_wording`)."""
    price_end = price_wording(doc).get(row.key)
    return price_end is not None and row.key[0] == page and price_end <= at and to <= row.key[1]


def _iter_line_cells(doc: Layout, line: Line, row: Row) -> Iterator[tuple[int, int]]:
    """:func:`_line_cells` one at a time, in order (a caller that needs one stops there).

    A cell is a run of words ``i..j``; what decides it is read once per word and per
    gap between two words (words are runs of non-space, so a column gap, a letter or
    a number lies in one word or one gap), not once per run.
    """
    numbers = row.arithmetic()
    text = line.text
    words = [m.span() for m in re.finditer(r"\S+", text)]
    spans = [(line.start + a, line.start + b) for a, b in words]
    bar = ["|" in text[a:b] for a, b in words]  # a column separator inside the word
    gap_after = [  # a column gap between word k and word k+1
        COLUMN_GAP.search(text[words[k][1] : words[k + 1][0]]) is not None
        for k in range(len(words) - 1)
    ]
    letter = [_LETTER.search(text[a:b]) is not None for a, b in words]
    # a quantity, price, amount or rate overlaps the word
    touches = [any(a < right and b > left for a, b in numbers) for left, right in spans]
    number_word = [_is_number_word(line, span, numbers) for span in spans]
    # a word right after a number that names a unit ("Stk.", "Wörter") is the number's,
    # so no cell starts there ("Stk. Kabelbinder"): the cell after it is the description
    unit = [is_unit(text[a:b]) and _after_number(text[:a]) for a, b in words]
    # a row's position number opens its line ("1. Diesel fuel"): no description's start
    position = bool(words) and _POSITION.fullmatch(text[words[0][0] : words[0][1]]) is not None
    for i, (start, _) in enumerate(words):
        letters = has_number_word = False
        for j in range(i, min(len(words), i + _MAX_CELL_WORDS)):
            if bar[j] or (j > i and gap_after[j - 1]):
                break
            letters = letters or letter[j]
            has_number_word = has_number_word or number_word[j]
            if not letters or touches[i] or touches[j]:
                continue  # no letter, or a quantity, price, amount or rate at an end
            if has_number_word:
                continue  # "kg x 26.95 =": the row's price inside (an "A4" is no price)
            if unit[i] or (i == j and _after_number(text[:start])) or (i == 0 and position):
                continue
            at, to = spans[i][0], spans[j][1]
            if _bounded(doc, Found(line.page, at, to, line, "exact"), row):
                yield (at, to)


def _is_number_word(line: Line, span: tuple[int, int], numbers: list[tuple[int, int]]) -> bool:
    """Whether a word is one of the row's arithmetic numbers, alone or with punctuation."""
    word = line.text[span[0] - line.start : span[1] - line.start]
    core = word.strip(_PUNCTUATION + "=x%")
    return any(a < span[1] and b > span[0] and not re.search(r"[^\W\d_]", core) for a, b in numbers)


def _after_number(before: str) -> bool:
    """Whether the text before a word ends with a number (the word is its unit)."""
    last = before.split()[-1] if before.split() else ""
    return bool(last) and last[-1].isdigit() and not COLUMN_GAP.search(before[-2:])


def description_cells(doc: Layout) -> list[str]:
    """Every text a row's description can be, as printed, in document order.

    A cell is a run of whole words on a row's first line, inside one column, with a
    letter, neither starting nor ending on one of the row's arithmetic numbers, that
    :func:`whole_description` accepts. (A number inside is kept: "Copy paper A4, 80 g".)
    """
    cells: dict[str, None] = {}
    breakdown = set(tax_rows(doc))
    for line in doc.lines:
        if line.number in breakdown:
            continue  # a tax breakdown's row ("Steuerfreie Leistungen  380,00  0  0,00")
        row = read_row(doc, line.number)
        if row is None:
            continue
        for at, to in _line_cells(doc, line, row):
            cells.setdefault(doc.pages[line.page - 1][at:to], None)
    return list(cells)


def row_cells(doc: Layout, row: Row) -> list[tuple[int, int]]:
    """Page offsets of every description cell of ``row`` (:func:`description_cells`)."""
    return _line_cells(doc, row.first, row)


def item_cells(doc: Layout, row: Row) -> list[tuple[int, int]]:
    """The cells ``row``'s description may be when the row is known to be an item
    (:func:`pipeline.extraction.table.whole_table`): a stacked row's description line
    prints its description and at most a position number before it, so that line is
    its only cell where it is one ("Copy paper A4, 80 g", never "paper A4, 80 g" or
    "80 g"); else every cell of :func:`row_cells`."""
    cells = row_cells(doc, row)
    if not stacked(doc, row):
        return cells
    line = row.first
    words = [m.span() for m in re.finditer(r"\S+", line.text)]
    if len(words) > 1 and _POSITION.fullmatch(line.text[words[0][0] : words[0][1]]):
        words = words[1:]
    whole = (line.start + words[0][0], line.start + words[-1][1])
    return [whole] if whole in cells else cells


def rows_by_amount(doc: Layout, *, exact: bool = True) -> list[list[Row]]:
    """Every reading of a row that adds up exactly (or, ``exact=False``, within two
    cents) with an amount in cents, grouped by the amount it reads (in document order),
    each group's starts in line order.

    No row takes its amount from a tax breakdown line ("380,00  0  0,00", base x 0 %
    = 0,00, read as 380 x 0 = 0,00 kept FeRD's "Physiotherapeut" table from proving whole)."""
    rows: dict[tuple[int, int], list[Row]] = {}
    breakdown = set(tax_rows(doc))
    for line in doc.lines:
        if not line.text.strip():
            continue
        row = read_row(doc, line.number)
        if row is None or not (row.read.exact or not exact) or row.read.line_amount.places != 2:
            continue
        if doc.line_at(row.first.page, row.key[1]).number not in breakdown:
            rows.setdefault(row.key, []).append(row)
    return [rows[key] for key in sorted(rows)]


def stacked(doc: Layout, row: Row) -> bool:
    """Whether ``row`` is a description line over the line that prints all its numbers
    and opens with the first of them ("     2 pcs x 1,636.69 = 3,273.38"), so that it
    prints no description of its own (a table's rows under its column header do)."""
    below = doc.line(row.first.number + 1)
    if below is None or below.page != row.first.page or row.end != below.end:
        return False
    numbers = row.arithmetic()
    first = len(below.text) - len(below.text.lstrip())
    return (
        bool(row.first.text.strip())
        and all(start >= below.start for start, _ in numbers)
        and min(start for start, _ in numbers) == below.start + first
    )
