"""The document as numbered lines: what the v2 prompt shows and what grounding measures.

Contract v2 never asks a model for character offsets. The prompt numbers the
OCR lines (``L1: ...``) across all pages, the model cites a line number where
a value sits in a table row, and everything below turns a number or a copied
value back into exact offsets. One numbering serves the prompt, the schema's
candidate lists and grounding, so a cited ``L12`` always means the same text.

Invariant: ``line.text == pages[line.page - 1][line.start:line.end]`` for every
line, with the newline excluded; form feeds only ever separate pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Line:
    """One printed line: ``number`` is 1-based over the document, offsets within its page."""

    number: int
    page: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Document:
    """OCR text split into pages (form feed) and numbered lines."""

    text: str

    @cached_property
    def pages(self) -> list[str]:
        return self.text.split("\f")

    @cached_property
    def lines(self) -> list[Line]:
        out: list[Line] = []
        for page_no, page in enumerate(self.pages, start=1):
            start = 0
            for raw in page.split("\n"):
                out.append(Line(len(out) + 1, page_no, start, start + len(raw), raw))
                start += len(raw) + 1
        return out

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
