"""Currency rule: ISO 4217, the tenant's allow list, and no second currency in the text.

Also the reading of currency codes and symbols printed beside amounts, which
the evidence rule reuses to check a currency span.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from pipeline.extraction import Extraction
from pipeline.validation_policy import Reason, ReasonCode, TenantMasterData

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
#: Symbols and the codes each may stand for.
CURRENCY_SYMBOLS: Mapping[str, frozenset[str]] = {
    "€": frozenset({"EUR"}),
    "£": frozenset({"GBP"}),
    "$": frozenset({"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"}),
    "¥": frozenset({"JPY", "CNY"}),
}
_SYMBOLS = "".join(CURRENCY_SYMBOLS)
_CURRENCY_MENTION_RE = re.compile(
    rf"(?<![A-Za-z])(?P<pre>[A-Z]{{3}}|[{_SYMBOLS}])\s?(?=\d)"
    rf"|(?<=\d)\s?(?P<post>[A-Z]{{3}}|[{_SYMBOLS}])(?![A-Za-z])"
)


def currency_mentions(text: str) -> list[tuple[str, frozenset[str]]]:
    """Currency codes and symbols printed next to a number: ``(label, codes it may mean)``."""
    norm = unicodedata.normalize("NFKC", text)
    out = []
    for match in _CURRENCY_MENTION_RE.finditer(norm):
        label = match.group("pre") or match.group("post")
        if label in CURRENCY_SYMBOLS:
            out.append((label, CURRENCY_SYMBOLS[label]))
        elif label in _TEXT_CODES:
            out.append((label, frozenset({label})))
    return out


def check_currency(
    extraction: Extraction, ocr_text: str, master_data: TenantMasterData
) -> list[Reason]:
    """ISO 4217, the tenant's allow list, and no other currency printed beside an amount."""
    if extraction.currency is None:
        return []
    code = extraction.currency.value
    reasons = []
    if code not in ISO_4217:
        reasons.append(
            Reason(ReasonCode.CURRENCY_NOT_ISO4217, "currency", f"{code} is not ISO 4217")
        )
    elif code not in master_data.permitted_currencies:
        allowed = ", ".join(sorted(master_data.permitted_currencies)) or "none"
        reasons.append(
            Reason(ReasonCode.CURRENCY_NOT_PERMITTED, "currency", f"{code} not in [{allowed}]")
        )
    others = sorted({label for label, codes in currency_mentions(ocr_text) if code not in codes})
    if others:
        reasons.append(
            Reason(
                ReasonCode.CURRENCY_MIXED,
                "currency",
                f"document also prices amounts in {', '.join(others)}, extracted {code}",
            )
        )
    return reasons
