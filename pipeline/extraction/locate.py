"""Locating a printed value in the OCR text: exact, normalised, then (free text only) fuzzy.

The first step of grounding (:mod:`pipeline.extraction.grounding`). Every
occurrence is returned with its page offsets, its line and how it matched, and
boundaries keep a value from being found inside a longer number or word.
"""

from __future__ import annotations

import difflib
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

from pipeline.cpu_budget import spend
from pipeline.extraction.labels import (
    DECOY_DATE_LABELS,
    DECOY_NUMBER_LABELS,
    INVOICE_WORDS,
    LABELS,
    REFERENCE_WORDS,
)
from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.invoice import MatchKind

#: Smallest similarity (difflib ratio on normalised text) a fuzzy match must reach.
FUZZY_MIN_RATIO = 0.85


@dataclass(frozen=True)
class Found:
    """One occurrence of a value: page offsets, the line, how it matched."""

    page: int
    start: int
    end: int
    line: Line
    match: MatchKind


def _fold(text: str) -> tuple[str, list[int]]:
    """NFKC, casefolded, whitespace runs as one space; with each folded char's source index."""
    spend()
    out: list[str] = []
    index: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if not i & 4095:
            spend()  # a whole long line is folded at once: the budget is checked within
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isspace():
                if space or not out:
                    continue
                space = True
                out.append(" ")
            else:
                space = False
                out.append(c)
            index.append(i)
    return "".join(out), index


_JOINERS = ".,'’\u202f\u00a0"


#: What may not touch a located value: ``word`` (ids, names) neither letters nor
#: digits; ``number`` (amounts, dates) no digit, not even across a separator, so
#: "34,56" is never found inside "1.234,56" while "kr33 955,78" still shows
#: "33 955,78"; ``letters`` (currency codes and signs) no letter; ``none``.
Boundary = Literal["word", "number", "letters", "none"]


def _standalone(text: str, start: int, end: int, boundary: Boundary) -> bool:
    """Whether ``text[start:end]`` is a whole token under ``boundary``."""
    if boundary == "none":
        return True
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if boundary == "letters":
        return not (before.isalpha() or after.isalpha())
    if boundary == "word" and (before.isalnum() or after.isalnum()):
        return False
    if before.isdigit() or after.isdigit():
        return False
    if before in _JOINERS and start > 1 and text[start - 2].isdigit():
        return False
    return not (after in _JOINERS and end + 1 < len(text) and text[end + 1].isdigit())


def occurrences(
    doc: Layout, value: str, *, fuzzy: bool, boundary: Boundary = "word"
) -> list[Found]:
    """Every place ``value`` is printed, exact matches first, then normalised, then fuzzy.

    ``boundary``: which neighbours disqualify an occurrence (see :data:`Boundary`),
    so a value is never found inside a longer number or word.
    """
    value = value.strip()
    if not value:
        return []
    exact = [
        Found(line.page, line.start + at, line.start + at + len(value), line, "exact")
        for line in (doc.lines if value in doc.text else ())
        for at in _finds(line.text, value)
        if _standalone(line.text, at, at + len(value), boundary)
    ]
    if exact:
        return exact
    want, _ = _fold(value)
    norm: list[Found] = []
    for line, (folded, index) in zip(doc.lines, _folded_lines(doc), strict=True):
        at = folded.find(want)
        while at >= 0 and want:
            start, end = index[at], index[at + len(want) - 1] + 1
            if _standalone(line.text, start, end, boundary):
                norm.append(
                    Found(line.page, line.start + start, line.start + end, line, "normalised")
                )
            at = folded.find(want, at + 1)
    if norm or not fuzzy:
        return norm
    return _fuzzy(doc, want)


def _finds(text: str, value: str) -> list[int]:
    """Where ``value`` starts in ``text``, left to right, not overlapping (as a regex of
    the escaped value finds it)."""
    out: list[int] = []
    at = text.find(value)
    while at >= 0:
        out.append(at)
        at = text.find(value, at + len(value))
    return out


@per_layout
def _folded_lines(doc: Layout) -> tuple[tuple[str, list[int]], ...]:
    """:func:`_fold` of every line, once per layout: grounding looks in every folded
    line for each value it does not find exactly."""
    return tuple(_fold(line.text) for line in doc.lines)


def _fuzzy(doc: Layout, want: str) -> list[Found]:
    """Best approximate match over word-aligned windows of each line (bounded work)."""
    best: tuple[float, Found] | None = None
    for line in doc.lines:
        words = [(token.start, token.end) for token in doc.tokens(line)]
        for i, (start, _) in enumerate(words):
            for j in range(i, min(len(words), i + 12)):
                end = words[j][1]
                window = line.text[start:end]
                if len(window) > 2 * len(want) + 4:
                    break
                ratio = difflib.SequenceMatcher(None, _fold(window)[0], want).ratio()
                if ratio >= FUZZY_MIN_RATIO and (best is None or ratio > best[0]):
                    best = (
                        ratio,
                        Found(line.page, line.start + start, line.start + end, line, "fuzzy"),
                    )
    return [best[1]] if best else []


def folded_line(doc: Layout, line: Line) -> str:
    """:func:`fold` of ``line`` of ``doc``, folded once per layout."""
    return _folded_lines(doc)[line.number - 1][0]


def fold(text: str) -> str:
    """``text`` folded as grounding compares it (NFKC, casefold, whitespace runs as one)."""
    return _fold(text)[0]


def labelled_in(doc: Layout, found: list[Found], labels: tuple[str, ...], *, last: bool) -> Found:
    """The occurrence whose line carries one of ``labels`` before it; else the first (the
    last with ``last``). Each line is folded once per layout: a label is before ``f``
    where its first folded occurrence on the line ends within the fold of the line's
    text before ``f`` (folding a prefix gives the prefix of the folded line). Folding
    each occurrence's line start again was quadratic in the line's length (a
    100,000-character line printing one amount a thousand times)."""
    reach = _label_reach(doc, labels)
    folded = _folded_lines(doc)
    for f in reversed(found) if last else found:
        _, index = folded[f.line.number - 1]
        if reach[f.line.number - 1] <= bisect_left(index, f.start - f.line.start):
            return f
    return found[-1] if last else found[0]


@per_layout
def _label_reach(doc: Layout, labels: tuple[str, ...]) -> tuple[int, ...]:
    """Per line, where the earliest-ending of ``labels`` ends in the folded line (past
    the line's end where none is printed on it)."""
    out = []
    for folded, _ in _folded_lines(doc):
        ends = [at + len(label) for label in labels if (at := folded.find(label)) >= 0]
        out.append(min(ends, default=len(folded) + 1))
    return tuple(out)


#: How much of a line before a value is its label (folded: a column layout's run of
#: spaces between label and value counts as one).
LABEL_WIDTH = 30


def label_before(f: Found) -> str:
    """The folded text just before ``f`` on its line: where its label is printed
    ("Leistungsdatum" 40 spaces before its date in a column layout, too).

    Only the line's end before ``f`` is folded: folding a text's last characters gives
    the end of folding all of it (whitespace runs differ only at the start), so a tail
    that folds to ``LABEL_WIDTH`` characters or more is enough. Folding the whole line
    for each value on it was quadratic in the line's length (a 100,000-character line
    of dates took 14 s of CPU to prepare a call)."""
    before = f.line.text[: f.start - f.line.start]
    size = 4 * LABEL_WIDTH
    while True:
        tail = before[-size:]
        folded = fold(tail)
        if len(folded) >= LABEL_WIDTH or len(tail) == len(before):
            return folded[-LABEL_WIDTH:]
        size *= 4


def decoy_label(f: Found) -> str | None:
    """The decoy-date word (delivery, order, ...) in the label before ``f``, if any: a
    date printed there is another date than the invoice's own."""
    label = label_before(f)
    return next((word for word in DECOY_DATE_LABELS if word in label), None)


def decoy_number_label(f: Found) -> str | None:
    """The word naming another document (order, customer, delivery note, contract) in
    the label before ``f``, if it is nearer to ``f`` than any word naming the invoice:
    a number printed there is that document's, not the invoice's ("Invoice 2024/17 for
    order 4504" refuses 4504, not 2024/17; "Order confirmation, invoice no. 17" keeps
    17). A reference word counts only where no invoice word is printed."""
    label = label_before(f)
    invoice_at = max((label.rfind(word) for word in INVOICE_WORDS), default=-1)
    decoy = max(((label.rfind(word), word) for word in DECOY_NUMBER_LABELS), default=(-1, ""))
    if decoy[0] > invoice_at:
        return decoy[1]
    if invoice_at < 0:
        return next((word for word in REFERENCE_WORDS if word in label), None)
    return None


def other_date_label(path: str, f: Found) -> bool:
    """Whether the date at ``f`` is labelled as the invoice's *other* date: a due date
    ("Vencimiento", "payable by") copied as the issue date, or a date labelled only as
    the issue date ("Fecha de emisión") copied as the due date. Due labels are specific,
    issue labels generic ("date"), so a due date's label may carry both ("Due date")."""
    label = label_before(f)
    due = any(word in label for word in LABELS["due_date"])
    if path == "issue_date":
        return due
    return not due and any(word in label for word in LABELS["issue_date"])


def trimmed(f: Found) -> Found:
    """The found span without the line's leading and trailing whitespace."""
    text = f.line.text
    lead = len(text) - len(text.lstrip())
    trail = len(text) - len(text.rstrip()) if f.end == f.line.end else 0
    return Found(f.page, f.start + lead, max(f.start + lead + 1, f.end - trail), f.line, f.match)
