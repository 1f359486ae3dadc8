"""Evidence rule: every span resolves in the OCR text and shows the extracted value.

A span is ``(page, start, end, quote)``. It passes only if the quote equals the
page text at those offsets (after :func:`normalise_text`), that text shows the
value by the field's own reading (numbers in any locale, dates in any common
form, identifiers compacted), it hides no bidi controls, and no two line items
cite the same row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal

from pipeline.invoice import (
    BIDI_CONTROLS,
    CURRENCY_SYMBOLS,
    Evidence,
    Extraction,
    Reason,
    ReasonCode,
    compact_id,
    compact_text,
    date_readings,
    normalise_text,
    number_readings,
)

ValueCheck = Callable[[str], bool]


def _amount_in(value: Decimal) -> ValueCheck:
    return lambda text: value in number_readings(text)


def _numbers_in(*values: Decimal) -> ValueCheck:
    def check(text: str) -> bool:
        readings = number_readings(text)
        return all(v in readings for v in values)

    return check


def _text_in(value: str) -> ValueCheck:
    return lambda text: normalise_text(value) in normalise_text(text)


def _id_in(value: str) -> ValueCheck:
    return lambda text: compact_id(value) in compact_id(text)


def _date_in(value: date) -> ValueCheck:
    return lambda text: value in date_readings(text)


def _days_in(days: int) -> ValueCheck:
    """A payment term's evidence prints the days between the issue and the due date."""
    return lambda text: re.search(rf"(?<!\d){days}(?!\d)", text) is not None


def _currency_in(code: str) -> ValueCheck:
    def check(text: str) -> bool:
        norm = normalise_text(text)
        if re.search(rf"(?<![A-Za-z]){code}(?![A-Za-z])", norm):
            return True
        return any(sym in norm and code in codes for sym, codes in CURRENCY_SYMBOLS.items())

    return check


def evidenced_fields(extraction: Extraction) -> Iterator[tuple[str, Evidence, ValueCheck]]:
    """Every evidence reference with its field path and the test its quote must pass."""
    e = extraction
    if e.supplier.name is not None:
        yield "supplier.name", e.supplier.name.evidence, _text_in(e.supplier.name.value)
    if e.supplier.vat_id is not None:
        yield "supplier.vat_id", e.supplier.vat_id.evidence, _id_in(e.supplier.vat_id.value)
    if e.supplier.tax_number is not None:
        yield (
            "supplier.tax_number",
            e.supplier.tax_number.evidence,
            _id_in(e.supplier.tax_number.value),
        )
    if e.invoice_number is not None:
        yield "invoice_number", e.invoice_number.evidence, _text_in(e.invoice_number.value)
    for path, dated in (("issue_date", e.issue_date), ("due_date", e.due_date)):
        if dated is None:
            continue
        if dated.evidence.match == "term" and e.issue_date is not None:
            yield path, dated.evidence, _days_in((dated.value - e.issue_date.value).days)
        else:
            yield path, dated.evidence, _date_in(dated.value)
    for path, code in (("currency", e.currency), ("tax_currency", e.tax_currency)):
        if code is not None:
            yield path, code.evidence, _currency_in(code.value)
    rates = {t.rate for t in e.tax_lines}
    for i, item in enumerate(e.line_items):
        # a row that prints no rate takes the document's only one (its tax line shows it)
        printed = (item.quantity, item.unit_price, item.line_amount)
        # a row not subject to VAT (contract v3, category O) has no rate to print
        shown = (
            printed
            if item.tax_rate is None or rates == {item.tax_rate}
            else (
                *printed,
                item.tax_rate,
            )
        )
        yield f"line_items[{i}]", item.evidence, _numbers_in(*shown)
    for j, tax in enumerate(e.tax_lines):
        numbers = (tax.base, tax.amount) if tax.rate is None else (tax.rate, tax.base, tax.amount)
        yield f"tax_lines[{j}]", tax.evidence, _numbers_in(*numbers)
    for path, amount in (
        ("net_total", e.net_total),
        ("tax_total", e.tax_total),
        ("gross_total", e.gross_total),
        ("prepaid_amount", e.prepaid_amount),
        ("rounding_amount", e.rounding_amount),
        ("amount_due", e.amount_due),
        ("tax_total_in_tax_currency", e.tax_total_in_tax_currency),
    ):
        if amount is not None:
            yield path, amount.evidence, _amount_in(amount.value)
    if e.iban is not None:
        iban = e.iban.value
        yield "iban", e.iban.evidence, lambda text: iban in compact_text(text)


def check_evidence(extraction: Extraction, ocr_text: str) -> list[Reason]:
    """Resolve every evidence span against the OCR text.

    The quote must equal ``page_text[start:end]`` after :func:`normalise_text`
    (so a fabricated or shifted span fails), the text there must show the
    extracted value, must not hide bidi controls, and no two line items may cite
    the same row.
    """
    pages = ocr_text.split("\f")
    reasons: list[Reason] = []
    rows: dict[tuple[int, int, int], int] = {}
    for path, ev, shows_value in evidenced_fields(extraction):
        if ev.match == "xml":  # read from an e-invoice's XML: the quote is its path
            continue
        if ev.page > len(pages) or ev.start >= ev.end or ev.end > len(pages[ev.page - 1]):
            reasons.append(
                Reason(
                    ReasonCode.EVIDENCE_OUT_OF_RANGE,
                    path,
                    f"page {ev.page} [{ev.start}:{ev.end}] is outside the document "
                    f"({len(pages)} page(s))",
                    rule="validation.evidence_out_of_range",
                )
            )
            continue
        actual = pages[ev.page - 1][ev.start : ev.end]
        wanted = normalise_text(ev.quote)
        if not wanted or wanted != normalise_text(actual):
            reasons.append(
                Reason(
                    ReasonCode.EVIDENCE_QUOTE_MISMATCH,
                    path,
                    f"quote {ev.quote[:60]!r} is not the text at page {ev.page} "
                    f"[{ev.start}:{ev.end}] ({actual[:60]!r})",
                    rule="validation.evidence_quote_mismatch",
                )
            )
            continue
        if any(ch in BIDI_CONTROLS for ch in actual):
            reasons.append(
                Reason(
                    ReasonCode.BIDI_CONTROL,
                    path,
                    "evidence span hides bidi controls",
                    rule="validation.bidi_control",
                )
            )
        if not shows_value(actual):
            reasons.append(
                Reason(
                    ReasonCode.EVIDENCE_VALUE_MISMATCH,
                    path,
                    f"the text at the span ({actual[:60]!r}) does not show the extracted value",
                    rule="validation.evidence_value_mismatch",
                )
            )
        if path.startswith("line_items["):
            key = (ev.page, ev.start, ev.end)
            if key in rows:
                reasons.append(
                    Reason(
                        ReasonCode.EVIDENCE_DUPLICATE,
                        path,
                        f"cites the same row as line_items[{rows[key]}]",
                        rule="validation.evidence_duplicate",
                    )
                )
            else:
                rows[key] = int(path[len("line_items[") : -1])
    return reasons
