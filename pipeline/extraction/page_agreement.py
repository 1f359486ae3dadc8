"""Whether the page of a Factur-X/ZUGFeRD PDF prints what its embedded XML states.

A page that says one thing and XML that says another is what a forged invoice looks
like, so every disagreement goes to review with ``xml_text_mismatch`` naming the fields.
The page must print the XML's invoice number, issue date, currency and gross total
(every e-invoice page does). Only a real disagreement may fail the check: where the
page prints a value in a way the readers here do not know, the fix is a better reader,
never a looser comparison.
"""

from __future__ import annotations

import re

from pipeline.extraction.cii import InvoiceFacts
from pipeline.invoice import (
    CURRENCY_SYMBOLS,
    Reason,
    ReasonCode,
    compact_id,
    currency_mentions,
    date_readings,
    normalise_text,
    number_readings,
)


def page_mismatches(facts: InvoiceFacts, page_text: str) -> list[Reason]:
    """One ``xml_text_mismatch`` naming each field the page does not print as the XML
    states it; empty when the page agrees."""
    missing: list[str] = []
    if facts.invoice_number is None or compact_id(facts.invoice_number) not in compact_id(
        page_text
    ):
        missing.append("invoice_number")
    if facts.issue_date is None or facts.issue_date not in date_readings(page_text):
        missing.append("issue_date")
    if facts.currency is None or not currency_printed(facts.currency, page_text):
        missing.append("currency")
    if facts.gross_total is None or abs(facts.gross_total) not in number_readings(page_text):
        missing.append("gross_total")
    if not missing:
        return []
    return [
        Reason(
            ReasonCode.XML_TEXT_MISMATCH,
            ", ".join(missing),
            f"the page does not print the XML's {', '.join(missing)}",
            rule="einvoice.xml_text_mismatch",
        )
    ]


def currency_printed(code: str, text: str) -> bool:
    """``text`` names the currency ``code``: the code as a word, a symbol of it next to a
    number (``12,00 €``), or a symbol of it as a column's unit (``Gesamt/€``, ``(€)``),
    the way a page prints it once in a table header and never beside the amounts."""
    norm = normalise_text(text)
    if re.search(rf"(?<![A-Za-z]){code}(?![A-Za-z])", norm):
        return True
    if any(code in codes for _, codes in currency_mentions(text)):
        return True
    units = [s for s, codes in CURRENCY_SYMBOLS.items() if code in codes and not s.isalpha()]
    return any(re.search(rf"(?:/|\()\s?{re.escape(symbol)}(?![^\W\d_])", norm) for symbol in units)
