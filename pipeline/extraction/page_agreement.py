"""Whether the page of a Factur-X/ZUGFeRD PDF prints what its embedded XML states.

A page that says one thing and XML that says another is what a forged invoice looks
like, so every disagreement goes to review with ``xml_text_mismatch`` naming the fields.
The page must print the XML's invoice number, issue date, currency and gross total
(every e-invoice page does). Two fields are checked only where the page states them
beyond doubt: the IBAN where the page prints exactly one (two accounts on a page say
nothing about which one the XML should name), and the due date where a date is printed
under a due label (:func:`~pipeline.extraction.label_proof.date_proof`, the proof
grounding keeps a model's due date by; a cash discount's deadline is none). Only a real
disagreement may fail the check: where the page prints a value in a way the readers
here do not know, the fix is a better reader, never a looser comparison.
"""

from __future__ import annotations

import re
from datetime import date

from pipeline.extraction.candidates import date_candidates, due_date_candidates, iban_candidates
from pipeline.extraction.einvoice_facts import InvoiceFacts
from pipeline.extraction.layout import layout_of
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
    states it (the IBAN and the due date only where the page proves its own); empty
    when the page agrees."""
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
    page_iban = printed_iban(page_text)
    if facts.iban is not None and page_iban is not None and page_iban != facts.iban:
        missing.append("iban")
    due = facts.payable_date
    if due is not None and (proven := printed_due_dates(page_text)) and due not in proven:
        missing.append("due_date")
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


def printed_iban(text: str) -> str | None:
    """The one IBAN ``text`` prints, compact and upper-case; None where it prints none or
    several (a second account, or one printed twice with a typo: no proof either way)."""
    found = {c.replace(" ", "").upper() for c in iban_candidates(text)}
    return found.pop() if len(found) == 1 else None


def printed_due_dates(text: str) -> set[date]:
    """Every reading of the dates ``text`` prints under a due label; empty where no date
    is labelled the due date (then the page proves none, and nothing is compared)."""
    doc = layout_of(text)
    return {
        d
        for printed in due_date_candidates(doc, date_candidates(text))
        for d in date_readings(printed)
    }
