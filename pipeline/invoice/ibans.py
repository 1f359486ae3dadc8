"""IBANs: each country's length and the ISO 13616 mod-97 checksum."""

from __future__ import annotations

import re
from collections.abc import Mapping

#: IBAN length per country (the common SEPA and neighbouring countries).
IBAN_LENGTHS: Mapping[str, int] = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24,
    "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27,
    "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
}  # fmt: skip


def iban_checksum_ok(iban: str) -> bool:
    """ISO 13616 mod-97: the rearranged IBAN as a number is 1 modulo 97."""
    iban = iban.replace(" ", "").upper()
    if not re.fullmatch(r"[A-Z]{2}[0-9]{2}[A-Z0-9]+", iban):
        return False
    digits = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
    return int(digits) % 97 == 1
