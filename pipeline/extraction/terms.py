"""Payment terms in days: a due date the page states without printing it.

"Please pay within 30 days", "Zahlbar innerhalb von 14 Tagen netto", "Pagamento a 30 gg"
state the due date as the issue date plus a number of days. Grounding computes it
(evidence ``match: "term"``, the term as printed) only where the page states one term
and no more: a cash-discount line ("2 % Skonto innerhalb 10 Tagen") or a month-end rule
("30 days end of month") admits another reading, so it is refused rather than picked.
"""

from __future__ import annotations

import re

from pipeline.extraction.layout import Layout, Line, per_layout
from pipeline.extraction.locate import fold

#: A number of days as printed: "30 days", "14 Tagen", "30 gg", "60 dagar".
TERM_RE = re.compile(
    r"(?<![\d.,])(\d{1,3})\s?(?:days?|calendar days|tage?n?|tg\.?|jours?|giorni|gg\.?|d[ií]as|"
    r"dagen|dagar|dage|dni|dní|päivää|napon belül|zile)(?![^\W\d_])",
    re.IGNORECASE,
)
#: Words of a payment instruction, folded: a number of days elsewhere (a delivery time,
#: a warranty, a return period) states no due date.
PAYMENT_WORDS = (
    "pay", "zahl", "paiement", "payer", "régl", "pagamento", "pagar", "pago", "betal",
    "płat", "splat", "maksu", "due", "fällig", "netto", "net", "échéance", "scadenza",
    "vencimiento", "vencimento", "forfald", "förfall", "termin płat", "fizet", "plată",
)  # fmt: skip
#: A term counted from another day than the invoice's, or with a discount beside it.
_OTHER_RULE = (
    "end of month", "fin de mois", "fine mese", "monatsende", "ende des monats",
    "fin de mes", "final del mes", "einde van de maand", "slutet av månaden", "eom",
    "skonto", "discount", "escompte", "sconto", "descuento", "korting", "rabat", "rabatt",
    "desconto", "%",
)  # fmt: skip


def _term_lines(doc: Layout) -> list[tuple[Line, re.Match[str]]]:
    """Each line that states a number of days in a payment instruction, with its first."""
    out = []
    for line in doc.lines:
        term = TERM_RE.search(line.text)
        if term is not None and any(word in fold(line.text) for word in PAYMENT_WORDS):
            out.append((line, term))
    return out


@per_layout
def payment_terms(doc: Layout) -> tuple[tuple[str, int, int, int], ...]:
    """The payment terms the page states: (printed, days, page, page offset) each, or ()
    where it states none or more than one reading (several terms, a discount, a
    month-end rule)."""
    found = _term_lines(doc)
    if not found:
        return ()
    days = {int(m.group(1)) for _, m in found}
    for line, _ in found:
        folded = fold(line.text)
        if len(TERM_RE.findall(line.text)) > 1 or any(rule in folded for rule in _OTHER_RULE):
            return ()
    if len(days) != 1:
        return ()
    return tuple(
        (m.group(), int(m.group(1)), line.page, line.start + m.start()) for line, m in found
    )


def term_days(value: str) -> int | None:
    """The days a term answer states ("30 days" -> 30), None where it is no term."""
    m = TERM_RE.fullmatch(value.strip())
    return int(m.group(1)) if m else None
