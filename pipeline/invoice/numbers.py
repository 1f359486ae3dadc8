"""The number reader: printed numbers read by code, never by a model.

Two readings of the same print, for two questions:

* :func:`numbers_in` reads every number of a text under the document's decimal mark
  (:func:`decimal_mark` decides it once, by majority over the amount-like numbers,
  so "1,234" is one thousand two hundred thirty-four in an English invoice and 1.234
  in a German one), with its offsets and value, percentages marked and dates left
  out: what grounding and the stages of extraction read a document with.
* :func:`number_readings` gives every value a printed number can mean in any common
  locale, a superset: what the evidence and currency rules check a span against,
  because the span must also sit at its stated offsets in the real text and the
  arithmetic rules check the values themselves.

Every reading of a line calls :func:`~pipeline.cpu_budget.spend`, where a document's
CPU budget ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from pipeline.cpu_budget import spend
from pipeline.invoice.text import normalise_text

CENT = Decimal("0.01")
#: Group separators besides the other of "." and ",": apostrophes, no-break and thin spaces.
_SPACE_GROUPS = "\u00a0\u202f\u2009"
_APOSTROPHES = "'’"
_DATE_RE = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}(?!\d)|\d{1,2}\.\s?\d{1,2}\.\s?\d{4}"
)
_AMOUNT_SHAPE_RE = re.compile(r"\d[.,]\d{2}(?!\d)")


@dataclass(frozen=True)
class Printed:
    """One number as printed: ``text[start:end]`` of the scanned text, read as ``value``."""

    start: int
    end: int
    text: str
    value: Decimal
    percent: bool
    places: int


def decimal_mark(text: str) -> str:
    """ "," or ".": the mark most amount-like numbers of ``text`` put before their cents,
    dates left out (a real invoice listing twenty treatment dates, "11.09.2018;
    14.09.2018; ...", outvoted its four amounts "380,00" and none could be read)."""
    masked = _DATE_RE.sub(lambda m: "#" * len(m.group()), text)
    marks = [m.group()[1] for m in _AMOUNT_SHAPE_RE.finditer(masked)]
    return "," if marks.count(",") > marks.count(".") else "."


@lru_cache(maxsize=8)  # compiled patterns, one per (mark, grouping): not text-keyed
def _number_re(mark: str, space_groups: bool) -> re.Pattern[str]:
    group = ("." if mark == "," else ",") + _SPACE_GROUPS + _APOSTROPHES
    if space_groups:
        group += " "
    g = re.escape(group)
    m = re.escape(mark)
    before = re.escape(".," + _APOSTROPHES)
    return re.compile(  # not inside a number; "kr.13958,56" still shows 13958,56
        rf"(?<!\d)(?<!\d[{before}])(?:\d{{1,3}}(?:[{g}]\d{{3}})+|\d+)(?:{m}\d+)?(?![\d])"
        rf"(?P<pct>\s?%)?"
    )


def uses_space_groups(text: str, mark: str) -> bool:
    """Whether the document groups thousands with a plain space ("1 234,56")."""
    return re.search(rf"\d \d{{3}}{re.escape(mark)}\d{{2}}(?!\d)", text) is not None


def read_number(printed: str, mark: str) -> Decimal | None:
    """The value of one printed number under decimal mark ``mark`` (None if unreadable)."""
    text = printed.strip().rstrip("%").strip()
    if text.isascii():  # the common case, in one pass: ASCII digits are all isdigit() has
        digits = _not_number_char(mark).sub("", text)
    else:
        digits = "".join(ch for ch in text if ch.isdigit() or ch == mark or ch in "-−")
    digits = digits.replace("−", "-").replace(mark, ".")
    try:
        value = Decimal(digits)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


@lru_cache(maxsize=8)  # a compiled pattern per mark: not text-keyed
def _not_number_char(mark: str) -> re.Pattern[str]:
    """What :func:`read_number` drops from an ASCII number: all but digits, ``mark``, "-"."""
    return re.compile(rf"[^0-9{re.escape(mark)}\-]")


def numbers_in(text: str, mark: str, *, space_groups: bool = False) -> list[Printed]:
    """Every printed number of ``text`` (dates masked).

    A row's position number ("1  Widget ...") is kept: it cannot be told from a
    leading quantity ("584 pcs Steel bracket ..."), and a row's reading
    (:func:`~pipeline.extraction.row_arithmetic.parse_item_row`) prefers the quantity
    printed closest to the price.

    A document's lines are read once, by :class:`~pipeline.extraction.layout.Layout`
    (``Layout.numbers_on``); this reads any other text (a row's lines together).
    """
    spend()  # every reading of a line passes here: where a document's CPU budget ends
    masked = _DATE_RE.sub(lambda m: "#" * len(m.group()), text)
    out: list[Printed] = []
    for match in _number_re(mark, space_groups).finditer(masked):
        body_end = match.start("pct") if match.group("pct") else match.end()
        body = text[match.start() : body_end]
        value = read_number(body, mark)
        if value is None:
            continue
        _, _, frac = body.partition(mark)
        out.append(
            Printed(
                match.start(),
                body_end,
                body,
                value,
                bool(match.group("pct")),
                len(frac),
            )
        )
    return out


def amount_strings(text: str, mark: str, *, space_groups: bool = False) -> list[str]:
    """Distinct amount-like strings (two or three decimals) in order of first appearance."""
    seen: dict[str, None] = {}
    for p in numbers_in(text, mark, space_groups=space_groups):
        if not p.percent and p.places in (2, 3):
            seen.setdefault(p.text, None)
    return list(seen)


_NUMBER_RUN_RE = re.compile(r"\d[\d.,'’ ]*\d|\d")
_GROUP_RE = re.compile(r"\d{3}(?:[.,]\d+)?")
_PLAIN_RE = re.compile(r"\d+(?:\.\d+)?")


def number_readings(text: str) -> set[Decimal]:
    """Every value a printed number in ``text`` can mean, in any common locale.

    ``1.234,56``, ``1,234.56``, ``1 234,56`` and ``1'234.56`` all read as
    1234.56; an ambiguous ``1,234`` reads as both 1.234 and 1234. Group
    separators are every one CLDR gives a European locale: ``.``, ``,``, the
    space family (no-break U+00A0, narrow no-break U+202F, thin U+2009: NFKC
    makes them spaces), ``'`` and ``’`` (``de_CH``, ``gsw``). A superset is
    safe here because the span must also sit at its stated offsets in the real
    text, and the arithmetic rules check the values themselves.
    """
    norm = normalise_text(text)
    out: set[Decimal] = set()
    for match in _NUMBER_RUN_RE.finditer(norm):
        negative = match.start() > 0 and norm[match.start() - 1] in "-−("
        pieces = match.group().split(" ")
        candidates = []
        for i in range(len(pieces)):
            candidates.append(pieces[i])
            joined = pieces[i]
            for nxt in pieces[i + 1 :]:
                if not _GROUP_RE.fullmatch(nxt):
                    break
                joined += nxt
                candidates.append(joined)
        for cand in candidates:
            cand = cand.strip(".,'’")
            for reading in (
                cand.replace(",", "").replace("'", "").replace("’", ""),
                cand.replace(".", "").replace("'", "").replace("’", "").replace(",", "."),
            ):
                if _PLAIN_RE.fullmatch(reading):
                    value = Decimal(reading)
                    out.add(value)
                    if negative:
                        out.add(-value)
    return out
