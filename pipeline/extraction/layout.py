"""The document as one layout: pages, numbered lines, tokens and printed numbers, read once.

Every stage of an extraction (the prompt, the grammar's candidates, the table's rows,
grounding) works on the same :class:`Layout`, built once per document by
:meth:`Layout.read`, so no stage splits the text, decides the decimal mark or reads a
line's numbers again.

Contract v2 never asks a model for character offsets. The prompt numbers the
OCR lines (``L1: ...``) across all pages, the model cites a line number where
a value sits in a table row, and everything below turns a number or a copied
value back into exact offsets. One numbering serves the prompt, the schema's
candidate lists and grounding, so a cited ``L12`` always means the same text.

Invariants: ``line.text == pages[line.page - 1][line.start:line.end]`` for every
line, with the newline excluded; form feeds only ever separate pages;
``numbers[n - 1]`` are line ``n``'s printed numbers read with the layout's ``mark``
(offsets within the line).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar

from pipeline.invoice import Printed, amount_strings, decimal_mark, numbers_in, uses_space_groups

_P = ParamSpec("_P")
_R = TypeVar("_R")
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class Line:
    """One printed line: ``number`` is 1-based over the document, offsets within its page."""

    number: int
    page: int
    start: int
    end: int
    text: str


class Token(NamedTuple):
    """A run of non-space characters: ``line.text[start:end]`` (offsets within the line)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Layout:
    """OCR text split into pages (form feed) and numbered lines, with the document's
    decimal mark (``mark``), whether it groups thousands with a plain space (``space``)
    and each line's printed numbers, all decided once."""

    text: str
    pages: tuple[str, ...] = field(compare=False, repr=False)
    lines: tuple[Line, ...] = field(compare=False, repr=False)
    mark: str = field(compare=False)
    space: bool = field(compare=False)
    numbers: tuple[tuple[Printed, ...], ...] = field(compare=False, repr=False)
    #: Readings later stages derive from this layout (:func:`per_layout`): computed on
    #: first use and kept as long as the layout, never shared with another document.
    _derived: dict[object, object] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @classmethod
    def read(cls, text: str, *, marks: tuple[str, bool] | None = None) -> Layout:
        """The layout of ``text``; ``marks``: ``(mark, space)`` where another text decided
        them (the shown part of a document reads its numbers as the whole document does)."""
        pages = tuple(text.split("\f"))
        lines: list[Line] = []
        for page_no, page in enumerate(pages, start=1):
            start = 0
            for raw in page.split("\n"):
                lines.append(Line(len(lines) + 1, page_no, start, start + len(raw), raw))
                start += len(raw) + 1
        if marks is None:
            mark = decimal_mark(text)
            marks = (mark, uses_space_groups(text, mark))
        mark, space = marks
        numbers = tuple(tuple(numbers_in(line.text, mark, space_groups=space)) for line in lines)
        return cls(text, pages, tuple(lines), mark, space, numbers)

    def line(self, number: int) -> Line | None:
        """Line ``number`` (1-based), or None when the document has no such line."""
        if 1 <= number <= len(self.lines):
            return self.lines[number - 1]
        return None

    def line_at(self, page: int, offset: int) -> Line:
        """The line holding character ``offset`` of page ``page``."""
        for line in self.lines:
            if line.page == page and line.start <= offset <= line.end:
                return line
        raise ValueError(f"no line at page {page} offset {offset}")

    def numbers_on(self, line: Line) -> list[Printed]:
        """``line``'s printed numbers (offsets within the line), as read once."""
        return list(self.numbers[line.number - 1])

    def tokens(self, line: Line) -> list[Token]:
        """``line``'s tokens: runs of non-space characters with their offsets."""
        return [Token(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(line.text)]

    def blanked(self, hidden: frozenset[int]) -> Layout:
        """This layout with the ``hidden`` lines left empty (every line keeps its number),
        its numbers read with this layout's decimal mark and grouping."""
        if not hidden:
            return self
        pages: list[list[str]] = [[] for _ in self.pages]
        for line in self.lines:
            pages[line.page - 1].append("" if line.number in hidden else line.text)
        text = "\f".join("\n".join(page) for page in pages)
        return Layout.read(text, marks=(self.mark, self.space))

    def numbered(self, hidden: frozenset[int] = frozenset(), note: str = "") -> str:
        """The text the prompt shows: ``L<n>: <line>``, a marker line before each new
        page, and each run of ``hidden`` lines on one page as one line
        ``L<first>-L<last>: <note>`` (``L<n>: <note>`` for one line)."""
        rows: list[str] = []
        page = 1
        run: list[int] = []

        def flush() -> None:
            if run:
                span = f"L{run[0]}" if len(run) == 1 else f"L{run[0]}-L{run[-1]}"
                rows.append(f"{span}: {note}")
                run.clear()

        for line in self.lines:
            if line.page != page:
                flush()
                page = line.page
                rows.append(f"--- page {page} ---")
            if line.number in hidden:
                run.append(line.number)
                continue
            flush()
            rows.append(f"L{line.number}: {line.text}")
        flush()
        return "\n".join(rows)


@functools.lru_cache(maxsize=16)
def layout_of(text: str) -> Layout:
    """:meth:`Layout.read` of ``text``, for the entry points that take a text.

    The one cache keyed on text, and it is about the entry points, not the stages: one
    attempt prepares the call for a document and then interprets the answer about the
    same text (and a perfect answer is written for it first), so all of them share one
    layout and the readings derived from it. A few documents' layouts are kept."""
    return Layout.read(text)


def per_layout(
    fn: Callable[Concatenate[Layout, _P], _R],
) -> Callable[Concatenate[Layout, _P], _R]:
    """``fn`` computed once per layout and arguments, and kept with the layout.

    For readings a stage derives from the whole layout and asks for again (a line's row,
    the table, the header lines): the prompt, the grammar and grounding of one document
    share them, and they end with the layout (no global cache keyed on text)."""

    @functools.wraps(fn)
    def once(layout: Layout, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        key = (once, args, tuple(kwargs.items()))
        try:
            return layout._derived[key]  # type: ignore[return-value]
        except KeyError:
            value = layout._derived[key] = fn(layout, *args, **kwargs)
            return value

    return once


@per_layout
def amounts(doc: Layout) -> tuple[str, ...]:
    """The distinct amount-like strings of the whole text, in order of first appearance
    (:func:`~pipeline.invoice.numbers.amount_strings`: the text read as one, as the
    grammar's and grounding's lists of totals read it)."""
    return tuple(amount_strings(doc.text, doc.mark, space_groups=doc.space))
