"""Readings of printed dates in every common form, for grounding and for the evidence rule.

Month names come from CLDR through Babel, not from a hand-made table: wide and
abbreviated, format (genitive, e.g. Polish ``marca``) and stand-alone
(nominative, ``marzec``) forms of every official or regional language of a
European territory, plus a few regional locales whose names differ
(``de_AT`` "Jänner", ``en_GB`` "Sept", ``pt_PT``). The table is built on first
use and cached (measured 0.1-0.4 s once per process, see the tests), so importing
the invoice model stays cheap. A name may stand for different months in different
languages (``listopad`` is November in Polish and Czech, October in Croatian): the
table maps each name to every month it can mean, and a reading is a superset like
:func:`pipeline.invoice.numbers.number_readings` is. That is safe for the same
reason: the span must sit at its stated offsets in the real text and show the
extracted date under one of its readings; a wider reading set cannot make a span
show a value it does not print in some language.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from datetime import date

from pipeline.invoice.text import normalise_text

#: Territories whose official and regional languages (per CLDR) supply month names.
EUROPEAN_TERRITORIES: tuple[str, ...] = tuple(
    """AD AL AT AX BA BE BG BY CH CY CZ DE DK EE ES FI FO FR GB GG GI GR HR HU IE IM IS IT
    JE LI LT LU LV MC MD ME MK MT NL NO PL PT RO RS RU SE SI SJ SK SM TR UA VA XK""".split()
)
#: Regional locales whose month names differ from their language's default.
_REGIONAL_LOCALES = ("de_AT", "en_GB", "pt_PT", "sr_Latn", "bs_Cyrl")
_GERMAN_TRANSLITERATION = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})


def _fold_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize(
        "NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    )


def _name_keys(name: str) -> set[str]:
    """Lookup forms of one CLDR month name: case-folded, without a trailing dot or the
    Catalan article (``de març``, ``d’abril``), and its accent-free and ``ae/oe/ue``
    spellings (OCR and ASCII systems print ``fevrier``, ``Maerz``)."""
    key = normalise_text(name).casefold().rstrip(".")
    key = key.split(" ")[-1]
    key = re.sub(r"^d['’]", "", key)
    return {key, _fold_accents(key), key.translate(_GERMAN_TRANSLITERATION)} - {""}


def european_locales() -> tuple[str, ...]:
    """The CLDR locales the month names and currency symbols are read from."""
    return _european_locales()


@functools.cache
def _european_locales() -> tuple[str, ...]:
    from babel.languages import get_official_languages
    from babel.localedata import locale_identifiers

    known = set(locale_identifiers())
    languages = {
        language
        for territory in EUROPEAN_TERRITORIES
        for language in get_official_languages(territory, regional=True, de_facto=True)
    }
    return tuple(sorted((languages | {"en", *_REGIONAL_LOCALES}) & known))


def locale_data(identifier: str) -> Mapping[str, object]:
    """One CLDR locale's own data, without what it inherits (Babel caches it per process).

    Read unmerged because merging every locale with ``root`` costs more than the
    whole table; regional locales then hold only what differs from their language,
    which is all the table needs from them.
    """
    from babel.localedata import load

    return load(identifier, merge_inherited=False)


def month_names() -> Mapping[str, frozenset[int]]:
    """Every CLDR month name of :func:`european_locales` (lookup form) → months it can mean."""
    return month_table(european_locales())


@functools.cache
def territory_locales(territory: str) -> tuple[str, ...]:
    """The CLDR locales of a territory's official and regional languages (``PL`` → pl)."""
    from babel.languages import get_official_languages

    languages = set(get_official_languages(territory.upper(), regional=True, de_facto=True))
    return tuple(loc for loc in european_locales() if loc.split("_")[0] in languages)


@functools.cache
def month_table(locales: tuple[str, ...]) -> Mapping[str, frozenset[int]]:
    """The month names of ``locales`` (lookup form) → the months each can mean."""
    table: dict[str, set[int]] = {}
    for identifier in locales:
        months = locale_data(identifier).get("months")
        if not isinstance(months, Mapping):
            continue
        for context in ("format", "stand-alone"):
            widths = months.get(context)
            if not isinstance(widths, Mapping):
                continue  # absent or an alias to the other context
            for width in ("wide", "abbreviated"):
                names = widths.get(width)
                if not isinstance(names, Mapping):
                    continue
                for number, name in names.items():
                    for key in _name_keys(str(name)):
                        table.setdefault(key, set()).add(int(number))
    return {key: frozenset(numbers) for key, numbers in table.items()}


def _months(name: str, table: Mapping[str, frozenset[int]]) -> frozenset[int]:
    key = name.casefold()
    return table.get(key) or table.get(_fold_accents(key), frozenset())


_ISO_DATE_RE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_NUMERIC_DATE_RE = re.compile(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})")
_WORD = r"[^\W\d_]+"
_SEP = r"[\s\-/.,]*"
_DAY = r"(?<!\d)(?P<d>\d{1,2})(?:st|nd|rd|th|er|re)?\.?[ºª]?"
_YEAR = r"(?P<y>\d{4})(?!\d)"
#: Month-name forms, each tried at every position (a lookahead, so a failed name
#: lookup never hides an overlapping date): day-month-year with the connectives
#: real suppliers print ("5 de marzo de 2025", "5. März 2025", "5th of March 2025",
#: "1er mars 2025", "5 d’abril de 2025"), month-day-year ("March 5th, 2025"),
#: year-month-day ("2025. március 5.", "2025 m. kovo 5 d.") and Latvian
#: year-day-month ("2025. gada 5. marts"). Day names around them are ignored.
_NAMED_DATE_RES = tuple(
    re.compile(f"(?={pattern})", re.IGNORECASE)
    for pattern in (
        rf"{_DAY}{_SEP}(?:(?:de|del|di|of|the)\s+|d['’])?(?P<m>{_WORD}){_SEP}"
        rf"(?:(?:de|del|di|of)\s+)?{_YEAR}",
        rf"(?<![^\W\d_])(?P<m>{_WORD}){_SEP}(?:the\s+)?{_DAY}(?!\d){_SEP}{_YEAR}",
        rf"(?<!\d){_YEAR}{_SEP}(?:m\.{_SEP})?(?P<m>{_WORD}){_SEP}{_DAY}(?!\d)",
        rf"(?<!\d){_YEAR}{_SEP}gada{_SEP}{_DAY}(?!\d){_SEP}(?P<m>{_WORD})",
    )
)


def date_readings(text: str, territory: str | None = None) -> set[date]:
    """Every date a printed date in ``text`` can mean: ISO, D.M.Y, D/M/Y or M/D/Y, and
    month names in any European language (see :func:`month_names`).

    ``territory`` (an ISO country code) reads month names in that country's languages
    only ("listopada" is November in Poland, October in Croatia); grounding passes the
    supplier's country to decide between such readings. Validation never passes it.
    """
    table = month_names()
    if territory is not None:
        table = month_table(territory_locales(territory))
    norm = normalise_text(text)
    triples: list[tuple[int, int, int]] = []  # (year, month, day)
    for y, m, d in _ISO_DATE_RE.findall(norm):
        triples.append((int(y), int(m), int(d)))
    for a, b, y in _NUMERIC_DATE_RE.findall(norm):
        triples += [(int(y), int(b), int(a)), (int(y), int(a), int(b))]
    for pattern in _NAMED_DATE_RES:
        for match in pattern.finditer(norm):
            for month in _months(match.group("m"), table):
                triples.append((int(match.group("y")), month, int(match.group("d"))))
    out = set()
    for y, m, d in triples:
        try:
            out.add(date(y, m, d))
        except ValueError:
            continue
    return out
