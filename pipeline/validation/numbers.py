"""Reading printed numbers in any European locale, shared by the evidence and currency rules.

Kept apart from :mod:`pipeline.validation.evidence` so that the currency rule
can read amounts without importing the evidence rule (which imports it).
"""

from __future__ import annotations

import re
from decimal import Decimal

from pipeline.validation.text import normalise_text

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
