"""Where a span of a page's text is printed: rectangles on the page, as fractions.

Evidence names a span ``[start, end)`` of one page's text. :func:`span_rects` gives
the rectangles the review console draws over that page's image: the words the span
touches (a word the span cuts is cut by its share of characters), joined into one
rectangle per text line, in reading order, each as fractions of the page's width and
height from its top-left corner (0..1), so they hold at any zoom.

Only a page whose words carry boxes in points and whose size is known has any: a
text page, or an image that declares no resolution, gives none.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.documents.document_text import DocumentPage


@dataclass(frozen=True, slots=True)
class Rect:
    """A rectangle as fractions (0..1) of the page's width and height, from the top-left."""

    left: float
    top: float
    right: float
    bottom: float


def span_rects(page: DocumentPage, start: int, end: int) -> tuple[Rect, ...]:
    """The rectangles covering ``page.text[start:end]``, one per text line it touches."""
    if page.width is None or page.height is None or page.width <= 0 or page.height <= 0:
        return ()
    lines: dict[int, tuple[float, float, float, float]] = {}
    for word in page.words:
        if word.box is None or word.end <= start or word.start >= end or word.end <= word.start:
            continue
        share = (word.box.right - word.box.left) / (word.end - word.start)
        left = word.box.left + share * (max(start, word.start) - word.start)
        right = word.box.left + share * (min(end, word.end) - word.start)
        edges = (left, word.box.top, right, word.box.bottom)
        line = page.text.count("\n", 0, word.start)
        seen = lines.get(line)
        lines[line] = edges if seen is None else _union(seen, edges)
    return tuple(_fraction(lines[line], page.width, page.height) for line in sorted(lines))


def _union(
    a: tuple[float, float, float, float], b: tuple[float, float, float, float]
) -> tuple[float, float, float, float]:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def _fraction(edges: tuple[float, float, float, float], width: float, height: float) -> Rect:
    def clamp(value: float) -> float:
        return min(1.0, max(0.0, value))

    left, top, right, bottom = edges
    return Rect(
        clamp(left / width), clamp(top / height), clamp(right / width), clamp(bottom / height)
    )
