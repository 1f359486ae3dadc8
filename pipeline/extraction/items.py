"""Line items: a v2 answer's items placed on the page's rows, read by arithmetic.

A small model copies descriptions reliably but miscounts line numbers, skips rows of
a long table and writes a neighbour's description twice. So a description is the key
to its row (the cited line only a hint), a row's numbers are read by code
(:mod:`pipeline.extraction.rows`), a description that breaks the table's pattern is
mended or refused, and the rows the model left out are read by code when arithmetic
proves the table whole. Whatever cannot be proven is refused (``ungrounded_value``),
never guessed; a row whose quantity and unit price arithmetic cannot tell apart and
nothing printed tells apart either is refused as ``ambiguous_role``
(:mod:`pipeline.extraction.roles`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from functools import cached_property

from pipeline.extraction.answer import ItemRef, printed_rows
from pipeline.extraction.description_role import description_fault
from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import Found, fold, occurrences, trimmed
from pipeline.extraction.refusal import Refuse
from pipeline.extraction.roles import Verdict, proven_numbers
from pipeline.extraction.rows import Row, read_row, row_cells, whole_description
from pipeline.extraction.shapes import CellShape, cell_shape
from pipeline.extraction.table import printed_table
from pipeline.invoice import Evidence, LineItem, MatchKind, ReasonCode, TaxLine


def _description(printed: str) -> str:
    """A description as printed, without the colon or dash that introduces the row's
    numbers ("- Widget A: 3 x 12.50 = 37.50" describes "Widget A")."""
    return printed.strip().rstrip(":–—-").rstrip()


class ItemReader:
    """Reads one document's line items; refusals go to ``refuse`` (path, detail)."""

    def __init__(
        self,
        doc: Layout,
        refuse: Refuse,
        evidence: Callable[[Found], Evidence],
    ) -> None:
        self.doc = doc
        self.refuse = refuse
        self.evidence = evidence

    @cached_property
    def rows_that_add_up(self) -> int:
        """Rows whose own numbers read as quantity x price = amount (only needed when an
        item cannot be placed, so computed on first use)."""
        return printed_rows(self.doc)

    def row(self, number: int) -> Row | None:
        return read_row(self.doc, number)

    def text_at(self, f: Found) -> str:
        return self.doc.pages[f.page - 1][f.start : f.end]

    def read(
        self, refs: tuple[ItemRef, ...], taxes: tuple[TaxLine, ...], net: Decimal | None
    ) -> tuple[LineItem, ...]:
        """Line items; a row without a printed rate takes the only rate the taxes show.

        Two items are never read from one row: a row is taken by where its amount is
        printed. When the model left rows out, code reads them itself if arithmetic
        proves the table whole (:meth:`_complete`). Otherwise an item that finds no row
        left is dropped only when, once every item is placed, every row that adds up is
        taken and the item takes nothing from another: it is on no row at all, or only
        on rows taken under its own description (a small model wrote a row twice in 3
        of 60 answers). Otherwise it is refused: a row taken under another description
        (a column header above a stacked row) may be this item's. Validation still sums
        the rows to the net.
        """
        placed: dict[int, LineItem] = {}
        taken: dict[tuple[int, int], str] = {}  # row -> the description that took it
        unplaced: list[tuple[int, ItemRef]] = []
        rates = {t.rate for t in taxes if t.rate is not None}  # a model's: never None
        used: set[tuple[int, int]] = set()
        spots: dict[int, tuple[Row, Found]] = {}
        after = 0
        for i, ref in enumerate(refs):
            faults: list[str] = []
            spot = self._place(ref, used, after, faults)
            if spot is None and faults:
                self.refuse(
                    f"line_items[{i}]",
                    f"{ref.description[:60]!r} is no row's description: {faults[0]}",
                    ReasonCode.UNGROUNDED_VALUE,
                    rule="items.description_role",
                )
                continue
            if spot is None:
                unplaced.append((i, ref))
                continue
            row, f = spot
            rate = self._rate(row, rates)
            if rate is None:
                self.refuse(
                    f"line_items[{i}]",
                    f"line {row.first.number} prints no tax rate",
                    ReasonCode.UNGROUNDED_VALUE,
                    rule="items.no_tax_rate",
                )
                continue
            used.add(row.key)
            description = _description(self.text_at(f))
            taken[row.key] = description
            spots[i] = (row, f)
            after = row.first.number
            placed[i] = self._item(row, description, rate, f.match, f"line_items[{i}]")
            self._continued(row, f.start, f"line_items[{i}]")
        shapes = self._table_shape(spots, placed)
        if unplaced or len(used) < self.rows_that_add_up:
            rest = self._complete(used, shapes, rates, net)
            if rest is not None:
                by_row = {(i.evidence.page, i.evidence.start): i for i in (*placed.values(), *rest)}
                return tuple(by_row[at] for at in sorted(by_row))
        all_taken = 0 < self.rows_that_add_up <= len(used)
        for i, ref in unplaced:
            if all_taken and all(
                fold(taken.get(key, "")) == fold(ref.description) for key in self._rows_of(ref)
            ):
                continue  # on no row at all, or a repeat of the rows it is on
            self.refuse(
                f"line_items[{i}]",
                f"{ref.description[:60]!r} is on no row that reads as quantity x price = "
                f"amount (cited line {ref.line})",
                ReasonCode.UNGROUNDED_VALUE,
                rule="items.not_on_row",
            )
        return tuple(placed[i] for i in sorted(placed))

    def _continued(self, row: Row, start: int, path: str) -> None:
        """Refuse a description that may go on below its row: the next line prints words
        only, starting in the description's column ("Design (hours): Of a sample" over
        "invoice"). A second line is the description's own on one layout and a note on
        another; nothing printed tells which (ARCHITECTURE rule 18): the FeRD corpus
        prints "Design (hours): Of a sample" over "invoice" in two samples whose XML
        names the item "Design (hours): Of a sample invoice" in one and "Design (hours)"
        in the other. Words with a number count ("Ballons: various colors," over
        "~2000ml"); an amount, a rate, or a line that runs into the numbers' columns
        does not."""
        last = self.doc.line_at(row.first.page, max(row.first.start, row.end - 1))
        below = self.doc.line(last.number + 1)
        if below is None or below.page != last.page or not below.text.strip():
            return
        if not any(ch.isalpha() for ch in below.text):
            return  # numbers only (the next row, a stacked row's numbers) or a rule ("-----")
        if any(p.percent or p.places >= 2 for p in self.doc.numbers_on(below)):
            return  # an amount or a rate: a stacked row's numbers, a gross price
        column = start - row.first.start
        indent = len(below.text) - len(below.text.lstrip())
        numbers = [n.start for n in self.doc.numbers_on(row.first) if n.start > column]
        if numbers and indent + len(below.text.strip()) > min(numbers):
            return  # runs into the numbers' columns: a row or a total, not a description
        if abs(indent - column) <= 2:
            self.refuse(
                path,
                f"the description may go on on line {below.number} ({below.text.strip()[:40]!r})",
                ReasonCode.AMBIGUOUS_ROLE,
                rule="items.description_continues",
            )

    def _table_shape(
        self, spots: dict[int, tuple[Row, Found]], placed: dict[int, LineItem]
    ) -> set[CellShape]:
        """How the placed items' descriptions sit in their rows; an item that breaks the
        table's pattern is mended or refused.

        The rows of one table print their descriptions alike (every one of 590 generated
        tables did), so an item whose cell sits otherwise than at least two others
        agree is a part the model copied ("Diesel" of "Diesel fuel", whose "fuel" is as
        short as a unit). It takes the one cell of the table's shape on its row that
        contains what the model wrote, else it is refused. Returns the shapes left."""
        shapes = {i: cell_shape(self.doc, row, f.start, f.end) for i, (row, f) in spots.items()}
        counts = Counter(shapes.values()).most_common()
        if len(counts) < 2 or counts[0][1] < 2 or counts[0][1] == counts[1][1]:
            return set(shapes.values())
        table = counts[0][0]
        for i, shape in shapes.items():
            if shape == table:
                continue
            row, f = spots[i]
            page = self.doc.pages[row.first.page - 1]
            whole = [
                page[a:b]
                for a, b in row_cells(self.doc, row)
                if cell_shape(self.doc, row, a, b) == table and a <= f.start and f.end <= b
            ]
            if len(whole) == 1:
                placed[i] = placed[i].model_copy(update={"description": _description(whole[0])})
                continue
            del placed[i]
            self.refuse(
                f"line_items[{i}]",
                f"{self.text_at(f)[:60]!r} is not printed like the table's other descriptions",
                ReasonCode.UNGROUNDED_VALUE,
                rule="items.description_shape",
            )
        return {table}

    @staticmethod
    def _rate(row: Row, rates: set[Decimal]) -> Decimal | None:
        if row.read.rate is not None:
            return row.read.rate.value
        return next(iter(rates)) if len(rates) == 1 else None

    def _item(
        self, row: Row, description: str, rate: Decimal, match: MatchKind, path: str
    ) -> LineItem:
        """The item ``row`` prints, its quantity and unit price as proven (ambiguous: kept
        as read and refused as ``ambiguous_role``, so a reviewer sees the row)."""
        first, end, _ = row
        read, proof = proven_numbers(self.doc, row)
        if proof.verdict is Verdict.AMBIGUOUS:
            q, p = (self.doc.pages[first.page - 1][first.start + n.start : first.start + n.end]
                    for n in (read.quantity, read.unit_price))  # fmt: skip
            self.refuse(
                path,
                f"line {first.number}: {q} and {p} multiply to the amount either way; {proof.why}",
                ReasonCode.AMBIGUOUS_ROLE,
                rule="roles.symmetric_factors",
            )
        f = trimmed(Found(first.page, first.start, end, first, match))
        return LineItem(
            description=description,
            quantity=read.quantity.value,
            unit_price=read.unit_price.value,
            line_amount=read.line_amount.value,
            tax_rate=rate,
            evidence=self.evidence(f),
        )

    def _complete(
        self,
        used: set[tuple[int, int]],
        shapes: set[CellShape],
        rates: set[Decimal],
        net: Decimal | None,
    ) -> list[LineItem] | None:
        """The rows the model left out, read by code, or None when that is not proven.

        A small model skips rows of a long table and writes a neighbour's description
        twice; code reads every row's numbers anyway. It takes the rows the model did
        not place only when arithmetic proves the table whole and the model's own
        choices name each missing description:

        * every row that adds up is one the model placed or one read here, and together
          their amounts equal the printed net total the model copied, to the cent;
        * the model placed at least two rows and chose its descriptions the same way
          on each (one :class:`~pipeline.extraction.shapes.CellShape`), and each missing
          row has exactly one cell of that shape.

        The items read here carry evidence ``match: "arithmetic"``.
        """
        if net is None or len(shapes) != 1 or len(used) < 2:
            return None
        (shape,) = shapes
        table = printed_table(self.doc)
        if not used <= {row.key for row in table}:
            return None
        if sum((row.read.line_amount.value for row in table), Decimal(0)) != net:
            return None
        out = []
        for row in table:
            if row.key in used:
                continue
            cells = [c for c in row_cells(self.doc, row) if cell_shape(self.doc, row, *c) == shape]
            rate = self._rate(row, rates)
            if len(cells) != 1 or rate is None:
                return None
            page = self.doc.pages[row.first.page - 1]
            cell = _description(page[cells[0][0] : cells[0][1]])
            out.append(self._item(row, cell, rate, "arithmetic", "line_items"))
            self._continued(row, cells[0][0], "line_items")
        return out

    def _rows_of(self, ref: ItemRef) -> list[tuple[int, int]]:
        """Every row whose line shows ``ref``'s description whole, taken or not."""
        keys = []
        for f in occurrences(self.doc, ref.description, fuzzy=True, boundary="none"):
            row = self.row(f.line.number)
            if row is not None and whole_description(self.doc, f, row):
                keys.append(row.key)
        return keys

    def _place(
        self, ref: ItemRef, used: set[tuple[int, int]], after: int, faults: list[str]
    ) -> tuple[Row, Found] | None:
        """Where an item is printed: its description is the key, the cited line a hint.

        A small model copies descriptions reliably but miscounts line numbers, so the
        row is one whose line shows the description and reads as a row, not taken by
        an earlier item: the first such row after the previous item (items are listed
        in document order), else the first before it. A description printed on no such
        row is refused. A spot whose text is in another role on its row
        (:func:`~pipeline.extraction.description_role.description_fault`) is none; why
        goes to ``faults``.
        """
        if not ref.description.strip():
            return None
        spots: list[tuple[tuple[bool, int], Found, Row]] = []
        for f in occurrences(self.doc, ref.description, fuzzy=True, boundary="none"):
            row = self.row(f.line.number)
            if row is None or row.key in used:
                continue
            if whole_description(self.doc, f, row):
                fault = description_fault(self.doc, f, row)
                if fault is not None:
                    faults.append(fault)
                    continue
                rank = (f.line.number <= after, f.line.number)
                spots.append((rank, f, row))
        if not spots:
            return None
        _, f, row = min(spots, key=lambda spot: spot[0])
        return row, f
