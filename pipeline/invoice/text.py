"""Comparison forms of printed text: whitespace, case, lookalike and identifier folding.

The rules never compare raw strings. A value and the OCR text it came from are
both brought to one of these forms first, so layout (line breaks, narrow
no-break spaces, NFKC compatibility characters) cannot fail a true value, and
lookalike letters (Cyrillic ``а`` for Latin ``a``) cannot pass a false one.
Everything here is a pure function of its argument.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

#: Bidirectional formatting characters (Trojan-Source class): they reorder what a
#: reviewer sees without changing what a program reads.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

#: Compact confusables map (a subset of Unicode TR39 for Latin lookalikes),
#: applied before case folding so each case maps to the letter it resembles.
CONFUSABLES: Mapping[str, str] = {
    # Cyrillic
    "А": "A", "а": "a", "В": "B", "в": "b", "Е": "E", "е": "e", "Ё": "E", "ё": "e",
    "Ѕ": "S", "ѕ": "s", "І": "I", "і": "i", "Ї": "I", "ї": "i", "Ј": "J", "ј": "j",
    "К": "K", "к": "k", "М": "M", "м": "m", "Н": "H", "н": "h", "О": "O", "о": "o",
    "Р": "P", "р": "p", "С": "C", "с": "c", "Т": "T", "т": "t", "У": "Y", "у": "y",
    "Х": "X", "х": "x", "Ү": "Y", "ү": "y", "Һ": "H", "һ": "h", "Ԁ": "D", "ԁ": "d",
    "Ԛ": "Q", "ԛ": "q", "Ԝ": "W", "ԝ": "w", "Ӏ": "I", "ӏ": "l", "Ь": "b", "ь": "b",
    "Г": "r", "г": "r", "З": "3", "з": "3", "П": "n", "п": "n",
    # Greek
    "Α": "A", "α": "a", "Β": "B", "β": "b", "Ε": "E", "ε": "e", "Ζ": "Z", "Η": "H",
    "η": "n", "Ι": "I", "ι": "i", "Κ": "K", "κ": "k", "Μ": "M", "Ν": "N", "ν": "v",
    "Ο": "O", "ο": "o", "Ρ": "P", "ρ": "p", "Τ": "T", "τ": "t", "Υ": "Y", "υ": "u",
    "Χ": "X", "χ": "x", "ϲ": "c", "Ϲ": "C", "ϳ": "j", "γ": "y",
    # Latin and digit lookalikes
    "ı": "i", "ȷ": "j", "ɡ": "g", "ɑ": "a", "0": "O", "1": "l", "I": "l",
    "|": "l",
}  # fmt: skip
_SKELETON_PAIRS = (("rn", "m"), ("vv", "w"))


def normalise_text(text: str) -> str:
    """NFKC, then every whitespace run to one space, trimmed: the evidence comparison form."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def normalise_name(name: str) -> str:
    """Comparison form of a party name: NFKC, format characters dropped, case-folded."""
    nfkc = unicodedata.normalize("NFKC", name)
    visible = "".join(ch for ch in nfkc if unicodedata.category(ch) != "Cf")
    return " ".join(visible.casefold().split())


def skeleton(name: str) -> str:
    """Fold lookalikes so two names that render alike compare equal (TR39 style).

    As in TR39 the mapping runs on the decomposed form and the result is
    decomposed again, so a lookalike base letter keeps its accent (``е́`` = ``é``).
    """
    nfd = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    mapped = "".join(CONFUSABLES.get(ch, ch) for ch in nfd if unicodedata.category(ch) != "Cf")
    folded = " ".join(unicodedata.normalize("NFD", mapped.casefold()).split())
    for pair, repl in _SKELETON_PAIRS:
        folded = folded.replace(pair, repl)
    return folded


def _script(ch: str) -> str | None:
    if not unicodedata.category(ch).startswith("L"):
        return None
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"


def mixed_script_tokens(name: str) -> list[str]:
    """Words whose letters come from more than one script (``Асme``: Cyrillic + Latin)."""
    out = []
    for token in unicodedata.normalize("NFKC", name).split():
        scripts = {s for s in map(_script, token) if s is not None}
        if len(scripts) > 1:
            out.append(token)
    return out


def compact_id(value: str) -> str:
    """VAT id comparison form: NFKC, upper case, ASCII letters and digits only.

    Swiss UIDs keep their number only (``CHE-123.456.789 MWST`` → ``CHE123456789``).
    """
    compact = re.sub(r"[^0-9A-Z]", "", unicodedata.normalize("NFKC", value).upper())
    return re.sub(r"^(CHE\d{9})(MWST|TVA|IVA)$", r"\1", compact)


def names_a_registration(value: str) -> bool:
    """Whether a tax registration the document states can identify its holder: it has a
    digit. A statement in its place (Sweden's ``Godkänd för F-skatt``, the seller's F-tax
    approval, which Peppol BIS 3's SE-R-005 puts where EN 16931's BT-32 goes) is the same
    words on every such seller's invoice, and identifies none of them."""
    return any(ch.isdigit() for ch in unicodedata.normalize("NFKC", value))


def compact_text(text: str) -> str:
    """IBAN comparison form: NFKC, upper case, whitespace and format characters dropped."""
    nfkc = unicodedata.normalize("NFKC", text).upper()
    return "".join(ch for ch in nfkc if not ch.isspace() and unicodedata.category(ch) != "Cf")
