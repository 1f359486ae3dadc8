"""Currency rule: ISO 4217, the tenant's allow list, and no second currency pricing the invoice.

Also the reading of currency codes and symbols printed beside amounts, which
the evidence rule reuses to check a currency span.

Which text counts: a currency printed beside a number is a second *pricing*
currency only where it prices this invoice, i.e. in its pricing lines
(:func:`pricing_lines`). A share capital in a legal footer ("Capital social
50 000 EUR"), a remark or a bank fee notice elsewhere on the page is not a
price of the invoice, and flagging it sent clean foreign-language invoices to
review. The pricing lines are derived from the extraction's own amount
evidence, which the evidence rule separately pins to real offsets, so a model
cannot shrink them by citing less: it must cite every line item, tax line and
total it returns, and the block between the first and last of those is taken
whole.

Symbols: the hand-kept core (``€ £ $ ¥``) plus every symbol CLDR gives an
active ISO 4217 currency in a European locale (``zł``, ``Kč``, ``₺``, ``US$``,
``лв.``...), read through Babel on first use. Symbols spelt only in ASCII
letters (``Br``, ``KM``, ``din.``, ``Ft``) are left out except the Nordic
``kr`` forms: short Latin words beside a number are mostly units or prose, and
a missed symbol only weakens this rule while a false one sends clean invoices
to review.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping

from pipeline.validation.contract import Evidence, Extraction
from pipeline.validation.dates import european_locales, locale_data
from pipeline.validation.numbers import number_readings
from pipeline.validation.policy import Reason, ReasonCode, TenantMasterData

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


def _amount_evidence(extraction: Extraction) -> list[Evidence]:
    e = extraction
    out = [item.evidence for item in e.line_items]
    out += [tax.evidence for tax in e.tax_lines]
    out += [a.evidence for a in (e.net_total, e.tax_total, e.gross_total) if a is not None]
    return out


def pricing_lines(extraction: Extraction, ocr_text: str) -> list[str]:
    """The OCR lines that price this invoice, where a second currency means a mixed invoice.

    Per page: every line that overlaps the evidence of a line item, a tax line or
    a total (net, tax, gross); every line between the first and the last of
    those (the pricing block: table, subtotals, totals box); and the lines that
    continue that block up and down until a blank line (so a "Payable: USD ..."
    printed straight under the total is in it, a footer after a blank line is
    not). Anywhere in the document, also every line that shows a currency beside
    a number reading as the extracted net, tax or gross total (a total restated
    in another currency, however far down the page). With no amount evidence
    that resolves, the whole text counts (nothing to scope by, so be strict).
    """
    pages = ocr_text.split("\f")
    marked: dict[int, set[int]] = {}
    for ev in _amount_evidence(extraction):
        if not 1 <= ev.page <= len(pages) or ev.start >= ev.end:
            continue
        offset = 0
        for i, line in enumerate(pages[ev.page - 1].split("\n")):
            if offset < ev.end and ev.start < offset + len(line) + 1:
                marked.setdefault(ev.page - 1, set()).add(i)
            offset += len(line) + 1
    if not marked:
        return ocr_text.split("\n")
    out: list[str] = []
    for page_no, rows in sorted(marked.items()):
        lines = pages[page_no].split("\n")
        first, last = min(rows), max(rows)
        while first > 0 and lines[first - 1].strip():
            first -= 1
        while last + 1 < len(lines) and lines[last + 1].strip():
            last += 1
        out += lines[first : last + 1]
    totals = {
        a.value
        for a in (extraction.net_total, extraction.tax_total, extraction.gross_total)
        if a is not None and a.value != 0
    }
    for line in ocr_text.replace("\f", "\n").split("\n"):
        if line not in out and currency_mentions(line) and totals & number_readings(line):
            out.append(line)
    return out


def check_currency(
    extraction: Extraction, ocr_text: str, master_data: TenantMasterData
) -> list[Reason]:
    """ISO 4217, the tenant's allow list, and no other currency in the pricing lines."""
    if extraction.currency is None:
        return []
    code = extraction.currency.value
    reasons = []
    if code not in ISO_4217:
        reasons.append(
            Reason(
                ReasonCode.CURRENCY_NOT_ISO4217,
                "currency",
                f"{code} is not ISO 4217",
                rule="validation.currency_not_iso4217",
            )
        )
    elif code not in master_data.permitted_currencies:
        allowed = ", ".join(sorted(master_data.permitted_currencies)) or "none"
        reasons.append(
            Reason(
                ReasonCode.CURRENCY_NOT_PERMITTED,
                "currency",
                f"{code} not in [{allowed}]",
                rule="validation.currency_not_permitted",
            )
        )
    priced = "\n".join(pricing_lines(extraction, ocr_text))
    others = sorted({label for label, codes in currency_mentions(priced) if code not in codes})
    if others:
        reasons.append(
            Reason(
                ReasonCode.CURRENCY_MIXED,
                "currency",
                f"the invoice is also priced in {', '.join(others)}, extracted {code}",
                rule="validation.currency_mixed",
            )
        )
    return reasons
