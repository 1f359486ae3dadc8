"""Currencies: the ISO 4217 codes, the symbols that stand for them, and their mentions in text.

Symbols: the hand-kept core (``€ £ $ ¥``) plus every symbol CLDR gives an
active ISO 4217 currency in a European locale (``zł``, ``Kč``, ``₺``, ``US$``,
``лв.``...), read through Babel on first use. Symbols spelt only in ASCII
letters (``Br``, ``KM``, ``din.``, ``Ft``) are left out except the Nordic
``kr`` forms: short Latin words beside a number are mostly units or prose, and
a missed symbol only weakens the currency rule while a false one sends clean
invoices to review.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping

from pipeline.invoice.dates import european_locales, locale_data

#: Active ISO 4217 alphabetic codes (circulating currencies and fund codes;
#: metals, bond units, testing and "no currency" codes excluded).
ISO_4217: frozenset[str] = frozenset(
    """AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV
    BRL BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF
    DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF
    IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR
    LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO
    NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK
    SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX
    USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG""".split()
)
#: Fund and complementary codes: valid ISO but never looked for in free text
#: (``CHE`` would otherwise fire on every Swiss UID ``CHE-123.456.789``).
_FUND_CODES = frozenset({"BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW"})
_TEXT_CODES = ISO_4217 - _FUND_CODES
#: Symbols kept whatever CLDR says (``$`` stands for many dollars outside Europe).
_CORE_SYMBOLS: Mapping[str, frozenset[str]] = {
    "€": frozenset({"EUR"}),
    "£": frozenset({"GBP"}),
    "$": frozenset({"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"}),
    "¥": frozenset({"JPY", "CNY"}),
    "US$": frozenset({"USD"}),
}
#: ASCII-letter symbols that are read although spelt in letters (see the module doc).
_WORD_SYMBOLS = frozenset({"kr", "kr.", "Dkr", "Nkr", "Ikr"})


@functools.cache
def _symbol_table() -> Mapping[str, frozenset[str]]:
    table = {symbol: set(codes) for symbol, codes in _CORE_SYMBOLS.items()}
    for identifier in european_locales():
        symbols = locale_data(identifier).get("currency_symbols")
        if not isinstance(symbols, Mapping):
            continue
        for code, raw in symbols.items():
            symbol = unicodedata.normalize("NFKC", str(raw)).strip()
            if code not in _TEXT_CODES or not symbol or symbol == code:
                continue
            if symbol.rstrip(".").isascii() and symbol.rstrip(".").isalpha():
                if symbol not in _WORD_SYMBOLS:
                    continue
            table.setdefault(symbol, set()).add(str(code))
    return {symbol: frozenset(codes) for symbol, codes in table.items()}


class _LazySymbols(Mapping[str, frozenset[str]]):
    """:data:`CURRENCY_SYMBOLS`: built from CLDR on first use, so importing stays cheap."""

    def __getitem__(self, symbol: str) -> frozenset[str]:
        return _symbol_table()[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(_symbol_table())

    def __len__(self) -> int:
        return len(_symbol_table())


#: Symbols and the codes each may stand for.
CURRENCY_SYMBOLS: Mapping[str, frozenset[str]] = _LazySymbols()


@functools.cache
def _mention_re() -> re.Pattern[str]:
    symbols = "|".join(re.escape(s) for s in sorted(_symbol_table(), key=len, reverse=True))
    label = rf"(?:{symbols}|[A-Z]{{3}})"
    return re.compile(
        rf"(?<![^\W\d_])(?P<pre>{label})\s?(?=\d)|(?<=\d)\s?(?P<post>{label})(?![^\W\d_])"
    )


def currency_mentions(text: str) -> list[tuple[str, frozenset[str]]]:
    """Currency codes and symbols printed next to a number: ``(label, codes it may mean)``."""
    norm = unicodedata.normalize("NFKC", text)
    out = []
    for match in _mention_re().finditer(norm):
        label = match.group("pre") or match.group("post")
        if label in _symbol_table():
            # "kr." may be DKK's symbol or SEK's "kr" ending a sentence: it means either
            codes = _symbol_table()[label] | _symbol_table().get(label.rstrip("."), frozenset())
            out.append((label, codes))
        elif label in _TEXT_CODES:
            out.append((label, frozenset({label})))
    return out
