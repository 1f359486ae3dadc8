"""The supplier's name as a choice among the names the page prints as a party's.

Asked for the supplier in free text, the adapter wrote the first line of every page of
the public ZUGFeRD corpus ("Beispiel-Rechnungen für ZUGFeRD 2.2", a stylesheet's
title, a date): 13 of 13 wrong where the page names its seller twice. The grammar now
offers the names the page prints as a party's, typed by what marks them:

* ``labelled``: the name a seller label gives: after it on its line ("Seller: Acme
  Ltd"), on the first line under a label printed alone ("Verkäufer:" over
  "Physiotherapeutin"), or a "Name:" cell in the label's block (the FeRD forms);
* ``legal form``: a cell that ends in a company's legal form ("Lieferant GmbH",
  "Fjord Parts AS", "Hoteles Costa Brava S.A."; ``lexicon/parties.json``).

A name printed only inside a buyer's block (under or after "Käufer", "Bill to",
"Customer") is no candidate. The model still chooses; master data and the VAT id on
file prove the choice (:mod:`pipeline.validation.supplier`). A page that marks no name
either way leaves the field free text, as before.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.invoice import normalise_name

#: At most this many names are offered (a page lists a handful of parties).
MAX_NAMES = 12
#: How many lines under a party label its block reaches.
BLOCK_LINES = 8
#: The longest name offered.
MAX_NAME_CHARS = 80

_CELL = re.compile(r"[^\s●|·•]+(?: [^\s●|·•]+)*")
_NAME_LABEL = re.compile(
    r"^(?:name|firma|company|raison sociale|nom|nome|nombre|naam|nazwa)\s*:?\s*", re.I
)


@dataclass(frozen=True)
class NameCandidate:
    """A name the page prints as a party's, where, and what marks it."""

    text: str
    line: int
    mark: str  # "labelled" or "legal form" (or hidden characters, which validation names)


@cache
def _lexicon() -> dict[str, tuple[str, ...]]:
    raw = json.loads(
        resources.files("pipeline.extraction").joinpath("lexicon/parties.json").read_text()
    )
    return {key: tuple(values) for key, values in raw.items() if not key.startswith("_")}


@cache
def _legal_form() -> re.Pattern[str]:
    forms = sorted(set(_lexicon()["legal_forms"]), key=len, reverse=True)
    alternatives = [
        re.escape(f) if len(f) < 4 else "(?i:" + re.escape(f) + ")" for f in forms
    ]  # "GMBH" and "Ltd." in any case; "AS" and "Co." only as written
    return re.compile(r"(?<![\w.&])(?:" + "|".join(alternatives) + r")[\s.,]*$")


@dataclass(frozen=True)
class _Block:
    side: str  # "seller" or "buyer"
    line: int
    column: int
    end_column: int | None  # where the next label on the label's line starts


def _label_side(cell: str) -> str | None:
    """The side ("seller" or "buyer") whose party label ``cell`` is, alone or followed by
    a colon or a slash ("Verkäufer:", "Käufer/Leistungsempfänger", "Seller: Acme Ltd");
    a name that starts with a label word ("Lieferant GmbH") or a field of a party
    ("Verkäufer-IBAN") is none."""
    folded = cell.casefold().strip()
    for side in ("seller", "buyer"):
        for label in _lexicon()[f"{side}_labels"]:
            if folded.startswith(label):
                rest = folded[len(label) :].lstrip()
                if not rest or rest[0] in ":/":
                    return side
    return None


def _cells(line: Line) -> list[tuple[int, str]]:
    """The line's cells: runs split by two spaces or more, or by a bullet or bar."""
    out = []
    for m in re.finditer(r"\S+(?: \S+)*", line.text):
        for part in _CELL.finditer(m.group()):
            out.append((m.start() + part.start(), part.group()))
    return out


def _blocks(doc: Layout) -> list[_Block]:
    blocks = []
    for line in doc.lines:
        labelled = [(col, side) for col, cell in _cells(line) if (side := _label_side(cell))]
        for k, (col, side) in enumerate(labelled):
            end = labelled[k + 1][0] if k + 1 < len(labelled) else None
            blocks.append(_Block(side, line.number, col, end))
    return blocks


def _in_block(block: _Block, line: Line, column: int) -> bool:
    if not block.line < line.number <= block.line + BLOCK_LINES:
        return False
    return column >= block.column - 2 and (block.end_column is None or column < block.end_column)


def _clean(cell: str) -> str | None:
    """A cell as a name: its label prefix dropped, trailing punctuation trimmed; None for
    a cell that is no name (a label, a value, an address of the web or of mail)."""
    head, colon, rest = cell.partition(":")
    if colon and _label_side(head) is not None:
        cell = rest  # "Supplier: Acme Tools Ltd"
    text = _NAME_LABEL.sub("", cell).strip(" ,;:")
    if not text or len(text) > MAX_NAME_CHARS or cell.rstrip().endswith(":"):
        return None
    if not any(ch.isalpha() for ch in text) or "@" in text or "www." in text.casefold():
        return None
    if "©" in text or text.casefold().startswith("(c)"):  # a copyright line
        return None
    digits = sum(ch.isdigit() for ch in text)
    return None if digits * 3 > len(text) else text


def _field(cells: list[str]) -> bool:
    """Whether a line's ``cells`` are one of a party's fields, a label and its value
    ("Globale Nummer: 4000001123452", "Nummer        : 549910"), not a name."""
    if _NAME_LABEL.match(cells[0]):
        return False
    head, colon, rest = cells[0].partition(":")
    if colon:
        return bool(head.strip() and (rest.strip() or len(cells) > 1))
    return len(cells) > 1 and cells[1].startswith(":")


def _named(cells: list[str]) -> str | None:
    """The name a "Name:" cell gives: the rest of its cell, else the next cell."""
    for k, cell in enumerate(cells):
        if not _NAME_LABEL.match(cell):
            continue
        rest = _NAME_LABEL.sub("", cell).strip()
        if rest:
            return _clean(rest)
        return _clean(cells[k + 1]) if k + 1 < len(cells) else None
    return None


def _labelled(doc: Layout, blocks: list[_Block]) -> list[NameCandidate]:
    """Names a seller label gives: after it on its line, in its block's "Name:" cell, or
    the first cell under a label printed alone."""
    out = []
    for block in (b for b in blocks if b.side == "seller"):
        line = doc.line(block.line)
        assert line is not None
        cells = [(col, c) for col, c in _cells(line) if col >= block.column]
        cells = [(col, c) for col, c in cells if block.end_column is None or col < block.end_column]
        own = cells[0][1]
        inline = own.split(":", 1)[1].strip() if ":" in own else ""
        if inline:
            name = _clean(inline)
        elif len(cells) > 1 and not _label_side(cells[1][1]):
            name = _clean(cells[1][1])
        else:
            name = None
        if name is not None:
            out.append(NameCandidate(name, block.line, "labelled"))
        first = True
        for number in range(block.line + 1, block.line + BLOCK_LINES + 1):
            under = doc.line(number)
            if under is None or under.page != line.page:
                break
            below = [c for col, c in _cells(under) if _in_block(block, under, col)]
            if not below:
                continue
            if _label_side(below[0]):
                break  # the next party's block
            if (given := _named(below)) is not None:
                out.append(NameCandidate(given, number, "labelled"))
            elif _field(below):
                continue  # "Globale Nummer: 4000001123452 (GTIN)" above the name
            elif first and name is None and (given := _clean(below[0])) is not None:
                out.append(NameCandidate(given, number, "labelled"))
            first = False
    return out


def _hidden(text: str) -> bool:
    """Whether ``text`` holds a format character (a bidi control, a zero-width joiner):
    such a cell is offered so that validation sees it and names it, never hidden from
    the choice (a name reversed by U+202E prints no legal form a reader would find)."""
    return any(unicodedata.category(ch) == "Cf" for ch in text)


def _account_holder(cells: list[tuple[int, str]], col: int) -> bool:
    """Whether the cell at ``col`` follows an account holder's label on its line
    ("Kontoname :  Kunden AG")."""
    before = " ".join(c for at, c in cells if at < col).casefold()
    return any(label in before for label in _lexicon()["account_holder_labels"])


def _with_legal_form(
    doc: Layout, blocks: list[_Block], *, seller_named: bool
) -> list[NameCandidate]:
    """Cells that end in a legal form, outside a buyer's block. Where a seller label
    names a party (``seller_named``), a bank account's holder is no candidate: it
    names the payee, a role of its own (the FeRD "Betriebskostenabrechnung" sample's
    seller is "Grundbesitz GmbH & Co.", its account's holder "Kunden AG", and the
    adapter took the holder)."""
    buyers = [b for b in blocks if b.side == "buyer"]
    out = []
    for line in doc.lines:
        cells = _cells(line)
        for col, cell in cells:
            name = _clean(cell)
            if name is None:
                continue
            if _legal_form().search(name) is None and not _hidden(name):
                continue
            if any(_in_block(b, line, col) or b.line == line.number for b in buyers):
                continue
            if seller_named and _account_holder(cells, col):
                continue
            out.append(NameCandidate(name, line.number, "legal form"))
    return out


@per_layout
def supplier_candidates(doc: Layout) -> tuple[NameCandidate, ...]:
    """The names offered as the supplier's: labelled ones first, then those with a legal
    form, in page order, each once (compared as :func:`normalise_name` does), at most
    :data:`MAX_NAMES`; a name also printed in a buyer's block is dropped."""
    blocks = _blocks(doc)
    buyer_names = {
        normalise_name(name)
        for b in blocks
        if b.side == "buyer"
        for line in (doc.line(n) for n in range(b.line + 1, b.line + BLOCK_LINES + 1))
        if line is not None
        for col, cell in _cells(line)
        if _in_block(b, line, col) and (name := _clean(cell))
    }
    seen: set[str] = set()
    out: list[NameCandidate] = []
    labelled = _labelled(doc, blocks)
    legal = _with_legal_form(doc, blocks, seller_named=bool(labelled))
    for candidate in (*labelled, *legal):
        key = normalise_name(candidate.text)
        if key in seen or (candidate.mark == "legal form" and key in buyer_names):
            continue
        seen.add(key)
        out.append(candidate)
    return tuple(out[:MAX_NAMES])
