"""Labels that prove a header value's role: the invoice number and the two dates.

A value found in the text proves that it is printed, not what it is: the year of a
letter's date line copied as the invoice number, the issue date copied as the due date
of a letter whose due date is written in a sentence, a delivery date taken where no due
date is printed (issue 41). Grounding therefore keeps such a value only where the page
says what it is:

* its **own label**: the words printed before it on its line, back to the previous
  value ("Invoice date 22/07/2023  Due by 20/09/2023": "due by" is the second date's,
  never the first's), :func:`own_label`;
* a **label above** it: a column header printed over it on one of the two lines above
  ("Rechnungsnummer   Datum" over "471102   05.03.2018"), :func:`label_above`;
* a **structure that admits one reading only**: a letter's place-and-date line
  ("Lisboa, 3 de março de 2026") dates the letter, so the invoice; a document that prints
  one date only has one issue date.

Nothing here reads a value; it only says whether a found occurrence is labelled for a
role. The lexicons are :mod:`pipeline.extraction.labels`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.extraction.labels import (
    DECOY_DATE_LABELS,
    DECOY_NUMBER_LABELS,
    DISCOUNT_WORDS,
    INVOICE_WORDS,
    LABELS,
    NET_WORDS,
    NUMBER_WORDS,
    PROSE_DATE_WORDS,
)
from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.locate import LABEL_WIDTH, Found, fold, folded_line

#: How far along its line a value's label is looked for (characters; a column layout's
#: run of spaces included).
_REACH = 160
#: Number words that only join a label's parts: no number label on their own.
_JOINERS = frozenset({"de", "di", "du", "da", "del"})
#: How many lines above a value its column header may stand.
ABOVE_REACH = 2
#: A letter's date line: a place name, a comma, then the date and nothing else.
_PLACE_LINE = re.compile(r"\s*[^\W\d_][^\W\d_ .'-]*(?:[ .'-][^\W\d_]+){0,3},\s*$")
#: Invoice-number labels written as one word ("Rechnungsnummer", "Fakturanr.").
_COMPOUND_NUMBER = re.compile(
    r"(?:rechnungs|faktura|factuur|fattura|factura|fatura|invoice|bill|bilags?|beleg"
    # abbreviated: "Fakt.nr", "Rg.-Nr.", "Doc. n.º", "Inv. no.", each where a word starts:
    # inside a word they name something else ("Org.nr", a company-register number, read
    # as "Rg.nr" and proved the invoice number of fuzz seed 51488)
    r"|(?<![^\W\d_])(?:fakt\.?|fact\.?|fatt\.?|fac\.?|rech\.?|rg\.?|inv\.|doc\.|dok\.))[- ]?"
    r"(?:nummer|number|numer|nr\.?|no\.?|n[°º]|n\.[°ºo]|num\.?|numero|número)(?![^\W\d_])"
    # the number word first: "Nº fra.", "N.º fact.", "No. de factura"
    r"|(?:n[°º]|n\.[°ºo]|no\.?|nr\.?|núm\.?)\s?(?:de\s|da\s|du\s)?"
    r"(?:fra|fact|fatt|fac|fakt|doc|factura|fatura|facture|fattura)\b"
)


def own_label(f: Found) -> str:
    """The folded words before ``f`` on its line, back to the previous value (a token
    with a digit), at most :data:`~pipeline.extraction.locate.LABEL_WIDTH` characters."""
    at = f.start - f.line.start
    before = f.line.text[max(0, at - _REACH) : at]  # a label is short: bounded work per value
    values = list(re.finditer(r"\S*\d\S*", before))
    if values:
        before = before[values[-1].end() :]
    return fold(before)[-LABEL_WIDTH:]


def label_above(doc: Layout, f: Found) -> str:
    """The folded words printed over ``f``'s columns on the nearest line of the
    :data:`ABOVE_REACH` lines above it that prints anything over those columns, where
    that line prints no value there (a column header, not another row of values); ""
    where there is none. A line that prints nothing over the columns is passed over: a
    sentence in another column between a header and its value ("Fälligkeit" over "bitte
    bis zum" printed left of it, over "21.11.2018", in the FeRD samples)."""
    col_start = f.start - f.line.start
    col_end = f.end - f.line.start
    number = f.line.number
    for _ in range(ABOVE_REACH):
        number -= 1
        above = doc.line(number)
        if above is None or above.page != f.line.page:
            return ""
        if not _cells_over(above, col_start, col_end):
            continue
        return _over(above, col_start, col_end)
    return ""


def label_after(f: Found) -> str:
    """The folded words after ``f`` on its line where nothing is printed before ``f`` and
    no value after the words ("INV-2024-70580   Invoice no."); else ""."""
    if f.line.text[: f.start - f.line.start].strip():
        return ""
    at = f.end - f.line.start
    after = f.line.text[at : at + _REACH]
    if re.search(r"\S*\d\S*", after):
        return ""  # a label between two values is the later one's ("46002 Valencia  Nº fra. F-25")
    return fold(after)[:LABEL_WIDTH]


def label_below(doc: Layout, f: Found) -> str:
    """The folded words printed under ``f``'s columns on the next non-empty line (a
    caption under its value), where that line prints no value there; else ""."""
    below = doc.line(f.line.number + 1)
    if below is None or below.page != f.line.page or not below.text.strip():
        return ""
    return _over(below, f.start - f.line.start, f.end - f.line.start)


def _labels(
    doc: Layout, f: Found, proves: Callable[[str], bool], names: Callable[[str], bool]
) -> str | None:
    """Which label proves ``f``'s role: its own label, the one above, else the one after
    it or below it; a label after or below counts only where no other label around
    ``f`` names a field (``names``): a value between two labels may belong to either."""
    own = own_label(f)
    if proves(own):
        return "label"
    above = label_above(doc, f)
    if proves(above):
        return "label above"
    after, below = label_after(f), label_below(doc, f)
    for where, label, others in (
        ("label after", after, (own, above, below)),
        ("label below", below, (own, above, after)),
    ):
        if proves(label) and not any(names(other) for other in others):
            return where
    return None


def _cells_over(above: Line, col_start: int, col_end: int) -> list[str]:
    """The cells of ``above`` (runs split by two spaces or more) over the columns."""
    cells = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", above.text)]
    return [text for a, b, text in cells if a < col_end and b > col_start]


def _over(above: Line, col_start: int, col_end: int) -> str:
    """The words of ``above`` that overlap columns ``col_start..col_end`` (whole cells)."""
    over = _cells_over(above, col_start, col_end)
    if not over or any(re.search(r"\d", text) for text in over):
        return ""
    return fold(" ".join(over))


def _has(label: str, words: tuple[str, ...] | frozenset[str]) -> bool:
    return any(word in label for word in words)


def _named_after_invoice(label: str, others: tuple[str, ...]) -> bool:
    """Whether ``label`` names another document (one of ``others``) after any invoice
    word: what follows is that document's."""
    invoice_at = max((label.rfind(word) for word in INVOICE_WORDS), default=-1)
    other_at = max((label.rfind(word) for word in others), default=-1)
    return other_at > invoice_at


def _decoy_number(label: str) -> bool:
    """Whether ``label`` names another document's number after any invoice word."""
    return _named_after_invoice(label, DECOY_NUMBER_LABELS)


def _number_label(label: str) -> bool:
    """Whether ``label`` names the invoice's number: an invoice word and a number word
    ("invoice no.", "n.º da fatura"), or one compound word ("rechnungsnummer")."""
    if not label or _decoy_number(label):
        return False
    if _COMPOUND_NUMBER.search(label):
        return True
    words = set(re.findall(r"[^\s:]+", label)) | set(label.split())
    # "de", "di", "du" join "Nº de factura" but name no number alone ("Fecha de factura")
    return _has(label, INVOICE_WORDS) and bool(words & (NUMBER_WORDS - _JOINERS))


def _title_before(doc: Layout, f: Found, reach: int = 6) -> bool:
    """Whether a line printing only an invoice word (the document's title, "INVOICE",
    "Rechnung") stands within ``reach`` lines above ``f``."""
    for number in range(max(1, f.line.number - reach), f.line.number):
        line = doc.line(number)
        if line is None:
            continue
        words = fold(line.text).strip(" :.").split()
        if 0 < len(words) <= 2 and any(_title_word(w) for w in words):
            return True
    return False


#: The most letters an invoice word may run on by in a title ("Rechnungen", "Fakturan",
#: "faktury"); a longer compound names something else ("Rechnungsstraße 12", an address
#: over "DE 12345 Beispielstadt", whose postcode was taken as the invoice number).
_TITLE_INFLECTION = 3


def _title_word(word: str) -> bool:
    word = word.strip(".,:;")
    return any(
        word.startswith(inv) and len(word) - len(inv) <= _TITLE_INFLECTION for inv in INVOICE_WORDS
    )


def number_proof(doc: Layout, f: Found) -> str | None:
    """How the page labels ``f`` as the invoice's number ("label", "label above",
    "title"), or None where nothing does."""
    labelled = _labels(doc, f, _number_label, _names_field)
    if labelled is not None:
        return labelled
    own = own_label(f)
    words = set(re.findall(r"[^\s:]+", own))
    # "de" alone is no label: it joins "Nº de factura" and prints a country ("DE 12345")
    if words & (NUMBER_WORDS - _JOINERS) and words <= NUMBER_WORDS | {"-"}:
        # a bare number label: "INVOICE" over "No.: 2025/4778", or an invoice word earlier
        # on its line, a compound too ("Handelsrechnung (380) Nr. 471102 vom 05.03.2018")
        line_before = fold(
            f.line.text[max(0, f.start - f.line.start - _REACH) : f.start - f.line.start]
        )
        if _title_before(doc, f) or (
            _has(line_before, INVOICE_WORDS) and not _decoy_number(line_before)
        ):
            return "title"
    return None


def _date_words(label: str, path: str, names_invoice: bool = True) -> bool:
    """Whether ``label`` names a date as ``path``'s; an issue date's label made of prose
    words only ("vom") only where the line names the invoice before the date
    (``names_invoice``)."""
    if not label or _has(label, DECOY_DATE_LABELS):
        return False
    due = _has(label, LABELS["due_date"])
    if path == "due_date":
        return due
    generic = tuple(w for w in LABELS["issue_date"] if w not in PROSE_DATE_WORDS)
    if due:
        return False
    return _has(label, generic) or (names_invoice and _has(label, PROSE_DATE_WORDS))


def _invoice_named_before(f: Found) -> bool:
    """Whether the words before ``f`` on its line name the invoice ("Baurechnung (204)
    Nr. 181301674 vom"), and no other dated document after it ("Rechnung gemäß
    Bestellung Nr. 2018-471331 vom 01.03.2018": the order's date), so a prose date word
    there dates the invoice, not a report or an order."""
    at = f.start - f.line.start
    before = fold(f.line.text[max(0, at - _REACH) : at])
    return _has(before, INVOICE_WORDS) and not _named_after_invoice(before, DECOY_DATE_LABELS)


def date_proof(doc: Layout, f: Found, path: str) -> str | None:
    """How the page labels the date at ``f`` as ``path`` ("issue_date" or "due_date"):
    "label", "label above", "letter" (issue date only: a place-and-date line), or None."""
    names_invoice = path != "issue_date" or _invoice_named_before(f)
    labelled = _labels(doc, f, lambda label: _date_words(label, path, names_invoice), _names_field)
    if labelled is not None and path == "due_date" and _discount_deadline(doc, f):
        return None
    if labelled is not None:
        return labelled
    before = f.line.text[: f.start - f.line.start]
    if path == "issue_date" and len(before) <= _REACH and _PLACE_LINE.fullmatch(before):
        after = f.line.text[f.end - f.line.start :]
        if not after.strip(" ."):
            return "letter"
    return None


_NET_RE = re.compile(
    r"(?<![^\W\d_])(?:" + "|".join(re.escape(w) for w in NET_WORDS) + r")(?![^\W\d_])"
)


def _discount_deadline(doc: Layout, f: Found) -> bool:
    """Whether the date at ``f`` may be a cash discount's deadline rather than the due
    date: its line, or the line before or after it, names a discount ("Zahlbar bis
    15.03. mit 3 % Skonto", "2 % discount if paid by ...") and its own label names no
    net payment or names the discount itself. A date whose own words say it is the net
    term's ("30 Tagen netto bis 04.04.", "ohne Abzug bis") is the due date."""
    near = [f.line]
    for number in (f.line.number - 1, f.line.number + 1):
        line = doc.line(number)
        if line is not None and line.page == f.line.page:
            near.append(line)
    if not any(line.number in _discount_lines(doc) for line in near):
        return False
    own = own_label(f)
    return _has(own, DISCOUNT_WORDS) or _NET_RE.search(own) is None


@per_layout
def _discount_lines(doc: Layout) -> frozenset[int]:
    """The lines that name a discount (folded), once per layout."""
    return frozenset(
        line.number for line in doc.lines if _has(folded_line(doc, line), DISCOUNT_WORDS)
    )


def _names_field(label: str) -> bool:
    """Whether ``label`` names a header field (a number, a date, a total), so a value
    next to it may be that field's."""
    if not label.strip():
        return False
    return (
        _number_label(label)
        or _has(label, LABELS["issue_date"])
        or _has(label, LABELS["due_date"])
        or _has(label, DECOY_DATE_LABELS)
        or _has(label, DECOY_NUMBER_LABELS)
        or any(_has(label, LABELS[k]) for k in ("net_total", "tax_total", "gross_total"))
    )


def due_label_near(doc: Layout, f: Found) -> bool:
    """Whether any label beside the date at ``f`` (before, above, after, below) names a
    due date, proven or not: an answer without a due date is then no safe answer."""
    labels = (own_label(f), label_above(doc, f), label_after(f), label_below(doc, f))
    return any(
        _has(label, LABELS["due_date"]) and not _has(label, DECOY_DATE_LABELS) for label in labels
    )


def claimed_date(doc: Layout, f: Found) -> bool:
    """Whether the date at ``f`` is labelled as anything: a due, issue or other date."""
    labels = (own_label(f), label_above(doc, f), label_after(f), label_below(doc, f))
    return any(
        _has(label, DECOY_DATE_LABELS) or _has(label, LABELS["due_date"]) for label in labels
    )
