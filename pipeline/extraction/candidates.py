"""What each header field of a v2 answer may be: the candidates the text prints.

The grammar (:func:`pipeline.extraction.answer.answer_schema`) offers a model only
these, as printed, so a small model copies one of them instead of writing free text
(it copied a customer's name as the invoice number, an address as the VAT id). Each
function is measured against the generator's truth in its docstring: a value a
grammar cannot offer is one the model can never write.
"""

from __future__ import annotations

import re

from pipeline.cpu_budget import spend
from pipeline.extraction.label_proof import date_proof, number_proof
from pipeline.extraction.labels import INVOICE_WORDS, NUMBER_WORDS
from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import (
    Found,
    decoy_label,
    decoy_number_label,
    occurrences,
    other_date_label,
)
from pipeline.invoice import CURRENCY_SYMBOLS, IBAN_LENGTHS, ISO_4217, date_readings

#: The longest identifier (invoice number, VAT id, date) the grammar offers or allows.
MAX_ID_CHARS = 40

_FUND_CODES = frozenset({"BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW"})
_CODE_RE = re.compile(r"(?<![A-Za-z])[A-Z]{3}(?![A-Za-z])")
_IBAN_RE = re.compile(r"(?<![A-Z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){2,8}")
#: Date shapes, each searched on its own so one shape never hides another's match.
_DATE_CANDIDATE_RES = tuple(
    re.compile(pattern)
    for pattern in (
        r"\d{4}-\d{1,2}-\d{1,2}",
        r"\d{1,2}[./-]\s?\d{1,2}[./-]\s?\d{2,4}",
        r"\d{1,2}\.?\s(?:de\s)?[^\W\d_]{3,12}\.?,?\s(?:de\s)?\d{4}",
        r"[^\W\d_]{3,12}\.?\s\d{1,2},?\s\d{4}",
    )
)


def currency_candidates(text: str) -> list[str]:
    """ISO codes and currency signs the text prints, in order of first appearance.

    A sign counts where no letter touches it, as grounding reads it
    (:func:`~pipeline.extraction.locate.occurrences`, boundary ``letters``): "kr" inside
    "Beskrivelse" is no sign. Offered it, SmolLM2 wrote "kr" as the currency of a DKK
    invoice (``fenceline eval``, generated invoice 2) and grounding refused it."""
    found: dict[int, str] = {}
    for m in _CODE_RE.finditer(text):
        if m.group() in ISO_4217 and m.group() not in _FUND_CODES:
            found.setdefault(m.start(), m.group())
    # Every sign printed ("kr" and "kr." both: the dot may end a sentence or the sign).
    signs = sorted(
        (at, sign)
        for sign in CURRENCY_SYMBOLS
        if sign in text and (at := _sign_at(text, sign)) >= 0
    )
    ordered = [found[k] for k in sorted(found)] + [sign for _, sign in signs]
    return list(dict.fromkeys(ordered))


def _sign_at(text: str, sign: str) -> int:
    """Where ``sign`` is first printed with no letter on either side, else -1."""
    at = text.find(sign)
    while at >= 0:
        end = at + len(sign)
        if not (at > 0 and text[at - 1].isalpha()) and not (
            end < len(text) and text[end].isalpha()
        ):
            return at
        at = text.find(sign, at + 1)
    return -1


#: Characters around a printed reference that are not part of it.
_REFERENCE_STRIP = ".,:;()[]{}\"'«»"
#: Characters after which a token's rest may be the reference ("Nr:2024/17", "N°17").
_REFERENCE_SPLIT = re.compile(r"[:#°º]")


def reference_candidates(doc: Layout, other: frozenset[str] = frozenset()) -> list[str]:
    """What the invoice number may be: :func:`labelled_numbers` where the text prints
    one, else the printed tokens another label proves (a label above, a title over a bare
    number label: :func:`~pipeline.extraction.label_proof.number_proof`), else every
    printed token with a digit (:func:`printed_references`), of which grounding then
    refuses any the page does not label."""
    named = labelled_numbers(doc, other)
    if named:
        return named
    printed = printed_references(doc, other)
    proven = [
        token
        for token in printed
        if any(number_proof(doc, f) for f in occurrences(doc, token, fuzzy=False))
    ]
    return proven or printed


_TOKEN_RE = re.compile(r"\S+")
#: An invoice word where it starts a word ("Fakturanummer", "Rechnungs-Nr."), any case.
_INVOICE_WORD_RE = re.compile(
    r"(?<![^\W\d_])(?:" + "|".join(re.escape(w) for w in INVOICE_WORDS) + ")", re.IGNORECASE
)


def labelled_numbers(doc: Layout, other: frozenset[str] = frozenset()) -> list[str]:
    """Tokens with a digit printed right after an invoice word, with only number words
    between (:data:`~pipeline.extraction.labels.NUMBER_WORDS`: "Faktura nr. 2023/7286",
    "Fakturanummer: F577362", "This invoice INV-2025-91177 was issued"), never an amount
    or a date of ``other`` ("Fecha de factura: 24 de mayo", "Total da fatura 12 429,83").

    Offered every printed token with a digit, SmolLM2 wrote the street number "41" of
    "Vesterbrogade 41" as the number of eval invoice gen-9911, where "Fakturanummer:
    F577362" was printed. The true number of each of 2,900 generated invoices (seeds
    0-1499, 5000-5599 and 9000-9799, a tenth with a prompt injection) is the one token
    found here. Grounding refuses any other number where one is found."""
    out: dict[str, None] = {}
    for line in doc.lines:
        text = line.text
        for m in _INVOICE_WORD_RE.finditer(text):
            if not _names_a_number(text, m.end()):
                continue
            # tokens read lazily from the word on: the first that is no number word ends
            # the search (all of the line's rest, tokenised per invoice word, was quadratic)
            for t in _TOKEN_RE.finditer(text, m.end()):
                if t.start() == m.end():
                    continue  # the invoice word's own rest ("nummer:")
                word = t.group().strip(_REFERENCE_STRIP + "#").casefold()
                if not word or word in NUMBER_WORDS:
                    continue
                at = t.start()
                if any(text.startswith(o, at) for o in other):
                    break
                core = t.group().strip(_REFERENCE_STRIP)
                cut = max((c.end() for c in _REFERENCE_SPLIT.finditer(core)), default=0)
                core = core[cut:]
                if any(ch.isdigit() for ch in core) and len(core) <= MAX_ID_CHARS:
                    out.setdefault(core, None)
                break
    return list(out)


#: How a compound word that starts with an invoice word ends where it names the
#: invoice's number ("Rechnungsnummer", "Rechnungs-Nr.", "Belegnr", "Fakturanr.").
_WORD_REST = re.compile(r"\S*")
_NUMBER_WORD_END = re.compile(r"(?:nummer|number|numer|numero|número|numéro|nr|no|n[°º]|num|nro)$")


def _names_a_number(text: str, end: int) -> bool:
    """Whether the word holding an invoice word that ends at ``end`` is the invoice's
    number label: the invoice word alone or inflected ("Invoice:", "Fakturan",
    "faktury", "documento"), or a compound that ends with a number word
    ("Rechnungsnummer"). A compound that names something else, an address, a period
    or an amount ("Rechnungsstraße 12", "Rechnungsjahr 2018", "Rechnungsbetrag"), is no
    label: the number after it is no invoice number."""
    rest = _WORD_REST.match(text, end)
    word = (rest.group() if rest else "").casefold().strip(_REFERENCE_STRIP + "#-/")
    return len(word) <= 2 or _NUMBER_WORD_END.search(word) is not None


def printed_references(doc: Layout, other: frozenset[str] = frozenset()) -> list[str]:
    """Every printed token that holds a digit (and its part after a ":", "#" or "°"),
    each at most :data:`MAX_ID_CHARS` long and none of ``other`` (the amounts and dates
    the grammar offers), those printed at least once under no other document's label
    first
    (:func:`~pipeline.extraction.locate.decoy_number_label`: an order, the customer,
    the bank's IBAN or BIC).

    As free text, SmolLM2 copied "Bianchi S.r.l." (the customer's name) as the number
    of eval invoice gen-9708, grounding found it printed, and it was accepted; offered
    every token with a digit, it took the BIC. Every invoice number of 3,190 generated
    invoices (seeds 0-1499, 5000-5599 and 9000-9799, and a tenth of them with a prompt
    injection) is among these, 27.6 a document on average."""
    tokens: dict[str, None] = {}
    plain: dict[str, None] = {}
    for line in doc.lines:
        for m in re.finditer(r"\S+", line.text):
            at, token = m.start(), m.group()
            cut = max((c.end() for c in _REFERENCE_SPLIT.finditer(token)), default=0)
            for offset, part in [(at, token), (at + cut, token[cut:])][: 2 if cut else 1]:
                core = part.strip(_REFERENCE_STRIP)
                if core in other or len(core) > MAX_ID_CHARS:
                    continue
                if not any(ch.isdigit() for ch in core):
                    continue
                tokens.setdefault(core, None)
                begin = line.start + offset + part.index(core)
                f = Found(line.page, begin, begin + len(core), line, "exact")
                if decoy_number_label(f) is None:
                    plain.setdefault(core, None)
    return list(plain) if plain else list(tokens)


#: A VAT or company id as printed: a country prefix ("DE", "ATU", "CHE"), then digit
#: groups that may hold letters, joined by single spaces, dots or hyphens.
_VAT_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2,3} ?-?[0-9][0-9A-Z.\-]*(?: [0-9A-Z][0-9A-Z.\-]*)*")
#: One printed without its country prefix ("VAT No: 123 4567 89"): digit groups.
_BARE_ID_RE = re.compile(r"(?<![\w.,/+-])\d{2,}(?:[ .\-]\d{2,})*(?![\w,/])")
#: The fewest digits a VAT id printed without its prefix has (postal codes have fewer).
_BARE_ID_DIGITS = 8
#: The fewest characters after its country code a VAT id has: eight in Denmark,
#: Finland, Hungary, Luxembourg, Malta, Slovenia and Ireland, more elsewhere in the EU,
#: Norway, Switzerland and the UK; only Romania's (2 to 10 digits) may be shorter.
_VAT_BODY_MIN = 8


def vat_id_candidates(text: str, other: frozenset[str] = frozenset()) -> list[str]:
    """VAT-id-like strings as printed, without trailing words that hold no digit
    ("CHE-186.091.390 MWST" offers "CHE-186.091.390"), and runs of digit groups with
    eight digits or more (an id printed without its country prefix), none of
    ``other`` (the IBANs, amounts and dates the grammar offers) nor part of one. As
    free text SmolLM2 copied an address line, "Rua de Santa Catarina 45", as the
    supplier's VAT id (eval invoice gen-9713). Every VAT id
    of 2,300 generated invoices (seeds 0-1499 and 5000-5599, 100 with a homoglyph
    supplier, 100 with a prompt injection) is among these, 5.3 a document on average
    (the buyer's among them: validation checks the id against the supplier's on file)."""
    out: dict[str, None] = {}
    found: list[tuple[int, str]] = []
    for m in _VAT_RE.finditer(text):
        groups = m.group().split(" ")
        while groups and not any(ch.isdigit() for ch in groups[-1]):
            groups.pop()
        printed = " ".join(groups).rstrip(".-")
        body = sum(ch.isalnum() for ch in printed) - 2
        if body < _VAT_BODY_MIN and not printed.startswith("RO"):
            continue  # a postcode after its country ("DE 80333 München"), no VAT id
        found.append((m.start(), printed))
    prefixed = [m.span() for m in _VAT_RE.finditer(text)]
    for m in _BARE_ID_RE.finditer(text):
        bare = m.group()
        if sum(ch.isdigit() for ch in bare) < _BARE_ID_DIGITS or any(bare in o for o in other):
            continue
        if not any(a <= m.start() < b for a, b in prefixed):
            found.append((m.start(), bare))
    for _, printed in sorted(found):
        if printed and printed not in other and len(printed) <= MAX_ID_CHARS:
            out.setdefault(printed, None)
    return list(out)


def iban_candidates(text: str) -> list[str]:
    """IBAN-like strings as printed, trimmed to their country's length where it is known."""
    out: dict[str, None] = {}
    for m in _IBAN_RE.finditer(text):
        printed = m.group()
        length = IBAN_LENGTHS.get(printed[:2])
        if length is not None:
            compact = 0
            for i, ch in enumerate(printed):
                compact += ch != " "
                if compact == length:
                    printed = printed[: i + 1]
                    break
            else:
                continue
        elif len(printed.replace(" ", "")) < 15:
            continue
        out.setdefault(printed, None)
    return list(out)


def date_candidates(text: str) -> list[str]:
    """Date-like strings as printed that read as at least one calendar date."""
    found: dict[tuple[int, str], None] = {}
    for pattern in _DATE_CANDIDATE_RES:
        for m in pattern.finditer(text):
            spend()
            printed = m.group().rstrip(",. ")
            if date_readings(printed):
                found.setdefault((m.start(), printed), None)
    return list(dict.fromkeys(printed for _, printed in sorted(found)))


def printed_due_date(doc: Layout, dates: list[str]) -> bool:
    """Whether one of ``dates`` is printed under a due label (then a payment term in days
    is no due date to offer: the page prints the date itself)."""
    return any(
        date_proof(doc, f, "due_date") is not None
        for d in dates
        for f in occurrences(doc, d, fuzzy=False, boundary="number")
    )


def due_date_candidates(doc: Layout, dates: list[str]) -> list[str]:
    """The dates the page labels as the due date
    (:func:`~pipeline.extraction.label_proof.date_proof`), printed at least once under no
    delivery, order or service label: the only dates grounding keeps as a due date.

    Offered every date where none was labelled, the adapter wrote a date on 10 of 10
    fuzzed invoices that print no due date (``no_due_date``) and on both FeRD renderings
    of `Elektron` (a work report's date), each refused; only null could be kept."""
    return [
        d
        for d in dates
        if any(
            decoy_label(f) is None and date_proof(doc, f, "due_date") is not None
            for f in occurrences(doc, d, fuzzy=False, boundary="number")
        )
    ]


def invoice_dates(doc: Layout, dates: list[str], path: str) -> list[str]:
    """The dates ``path`` (issue_date or due_date) may be: those grounding accepts for
    it, i.e. printed at least once without a delivery, order or service label before
    them (the adapter picked a delivery date in 2 of 60 answers) and not labelled only
    as the invoice's other date (SmolLM2 copied "Termin płatności: 20 listopada 2026"
    as the issue date of the demo's invoice 4); those the page labels for ``path``
    (:func:`~pipeline.extraction.label_proof.date_proof`) first. Where no date qualifies,
    the dates without a decoy label, else all: grounding then refuses what the model
    picks without its label."""
    plain: list[str] = []
    own: list[str] = []
    proven: list[str] = []
    for d in dates:
        found = [
            f for f in occurrences(doc, d, fuzzy=False, boundary="number") if decoy_label(f) is None
        ]
        if found:
            plain.append(d)
        if any(not other_date_label(path, f) for f in found):
            own.append(d)
        if any(date_proof(doc, f, path) for f in found):
            proven.append(d)
    return proven or own or plain or dates
