"""The OCR text as the review page shows it: evidence spans marked, controls revealed.

Each grounded value of a result carries ``evidence`` (page, start, end) into the
OCR text. :func:`marked_pages` cuts every page into segments at span
boundaries, so overlapping spans (a supplier's VAT id inside its address line)
still mark every character once, each segment naming every field that covers
it; the first segment of a span carries the anchor the field links to.

:func:`reveal` is how any attacker-controlled text reaches a page: HTML-escaped
(``<script>``, comments and ``javascript:`` stay literal text, and nothing is
ever turned into a link), with bidi controls, zero-width and other invisible
characters replaced by a visible ``⟨U+XXXX⟩`` marker, so text cannot reorder
or hide itself on screen.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from markupsafe import Markup, escape

from pipeline.invoice import SCALAR_FIELDS


@dataclass(frozen=True)
class Span:
    field: str
    page: int
    start: int
    end: int


@dataclass(frozen=True)
class Segment:
    text: str
    fields: tuple[str, ...]
    anchors: tuple[str, ...]


def anchor_id(field: str) -> str:
    """The element id of a field's evidence (``ev-line_items-3``): ids stay simple."""
    return "ev-" + "".join(ch if ch.isalnum() or ch == "_" else "-" for ch in field).strip("-")


def field_id(field: str) -> str:
    return "field-" + anchor_id(field)[3:]


def _node(result: dict[str, Any], path: str) -> Any:
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _span(field: str, evidence: Any) -> Span | None:
    if not isinstance(evidence, dict):
        return None
    try:
        page, start, end = int(evidence["page"]), int(evidence["start"]), int(evidence["end"])
    except (KeyError, TypeError, ValueError):
        return None
    return Span(field, page, start, end) if end > start >= 0 and page >= 1 else None


def evidence_spans(result: dict[str, Any]) -> list[Span]:
    """Every evidence span of a stored result: header fields, line items, tax lines."""
    spans: list[Span] = []
    for path in SCALAR_FIELDS:
        node = _node(result, path)
        if isinstance(node, dict) and (s := _span(path, node.get("evidence"))):
            spans.append(s)
    for group in ("line_items", "tax_lines"):
        items = result.get(group)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and (s := _span(f"{group}[{i}]", item.get("evidence"))):
                spans.append(s)
    return spans


def marked_pages(ocr_text: str, spans: list[Span]) -> list[list[Segment]]:
    """Each page of ``ocr_text`` as segments; spans outside a page are ignored."""
    pages = ocr_text.split("\f")
    out: list[list[Segment]] = []
    for number, page in enumerate(pages, start=1):
        mine = [s for s in spans if s.page == number and s.end <= len(page)]
        cuts = sorted({0, len(page), *(s.start for s in mine), *(s.end for s in mine)})
        segments: list[Segment] = []
        for a, b in pairwise(cuts):
            covering = tuple(s.field for s in mine if s.start <= a and b <= s.end)
            starting = tuple(anchor_id(s.field) for s in mine if s.start == a)
            segments.append(Segment(page[a:b], covering, starting))
        out.append(segments)
    return out


def _hidden(ch: str) -> bool:
    if ch in "\n\t":
        return False
    return unicodedata.category(ch) in {"Cf", "Cc", "Co", "Cn", "Zl", "Zp"}


def reveal(text: object) -> Markup:
    """``text`` escaped for HTML, with invisible and bidi characters shown as markers."""
    value = "" if text is None else str(text)
    parts: list[str] = []
    for ch in value:
        if _hidden(ch):
            parts.append(f'<span class="ctl" title="hidden character">⟨U+{ord(ch):04X}⟩</span>')
        else:
            parts.append(str(escape(ch)))
    return Markup("".join(parts))
