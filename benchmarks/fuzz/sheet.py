"""Printed lines that remember where each value went: the fuzzer's page writer.

A :class:`Row` is one line of text plus the spans of the values printed on it, keyed by
the truth field they show (``"number"``, ``"item:3"``...). Rows are put together on pages
(:class:`Sheet`) and side by side (:func:`beside`), and every move shifts the spans with
the text, so the offsets :meth:`Sheet.spans` returns are where the values really are.

Invariant: for every span ``(page, start, end)`` of key ``k``,
``text.split("\\f")[page - 1][start:end]`` is exactly the string that was printed for ``k``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Part = str | tuple[str, str]
Span = tuple[int, int, int]


@dataclass(frozen=True)
class Row:
    text: str
    spans: tuple[tuple[str, int, int], ...] = ()

    @staticmethod
    def of(*parts: Part) -> Row:
        """A line from plain strings and ``(key, printed)`` pairs, spans recorded."""
        text, spans = "", []
        for part in parts:
            if isinstance(part, tuple):
                key, shown = part
                spans.append((key, len(text), len(text) + len(shown)))
                text += shown
            else:
                text += part
        return Row(text, tuple(spans))

    def shifted(self, by: int, prefix: str = "") -> Row:
        """This row after ``prefix`` (``by`` characters long)."""
        return Row(prefix + self.text, tuple((k, s + by, e + by) for k, s, e in self.spans))

    def whole(self, key: str) -> Row:
        """This row with a span over all its text (stripped) for ``key``: an item's row."""
        start = len(self.text) - len(self.text.lstrip())
        return Row(self.text, (*self.spans, (key, start, len(self.text.rstrip()))))


def beside(left: list[Row], right: list[Row], gap: int = 6) -> list[Row]:
    """Two blocks printed next to each other, the right one starting in one column."""
    width = max((len(r.text) for r in left), default=0) + gap
    out = []
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else Row("")
        if i >= len(right) or not right[i].text:
            out.append(a)
            continue
        b = right[i]
        pad = a.text.ljust(width)
        out.append(Row(pad + b.text, a.spans + b.shifted(width).spans))
    return out


def right_aligned(rows: list[Row], width: int) -> list[Row]:
    """Rows pushed to end at ``width`` (a totals block)."""
    out = []
    for row in rows:
        shift = max(0, width - len(row.text))
        out.append(row.shifted(shift, " " * shift))
    return out


@dataclass
class Sheet:
    """Pages of rows; a form feed separates pages in :meth:`text`."""

    pages: list[list[Row]] = field(default_factory=lambda: [[]])

    def add(self, *rows: Row) -> None:
        self.pages[-1].extend(rows)

    def lines(self, *texts: str) -> None:
        self.add(*(Row(t) for t in texts))

    def blank(self) -> None:
        self.add(Row(""))

    def new_page(self) -> None:
        self.pages.append([])

    def text(self) -> str:
        return "\f".join("\n".join(r.text for r in page) for page in self.pages)

    def spans(self) -> dict[str, list[Span]]:
        """Every printed span per key, in reading order: ``(page, start, end)`` in its page."""
        out: dict[str, list[Span]] = {}
        for page_no, page in enumerate(self.pages, start=1):
            offset = 0
            for row in page:
                for key, s, e in row.spans:
                    out.setdefault(key, []).append((page_no, offset + s, offset + e))
                offset += len(row.text) + 1
        return out
