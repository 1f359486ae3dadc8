"""Currency rule: ISO 4217, the tenant's allow list, and no second currency pricing the invoice.

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

The codes, the symbols and their mentions in text are read by
:mod:`pipeline.invoice.currencies`.
"""

from __future__ import annotations

from pipeline.invoice import (
    ISO_4217,
    Evidence,
    Extraction,
    Reason,
    ReasonCode,
    TenantMasterData,
    currency_mentions,
    number_readings,
)


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
    """ISO 4217, the tenant's allow list, and no other currency in the pricing lines; a
    tax currency (contract v3, BT-6) is ISO 4217 and another than the invoice's."""
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
    second = extraction.tax_currency
    if second is not None and (second.value not in ISO_4217 or second.value == code):
        reasons.append(
            Reason(
                ReasonCode.CURRENCY_NOT_ISO4217,
                "tax_currency",
                f"tax currency {second.value} is not ISO 4217 or is the invoice currency",
                rule="validation.currency_not_iso4217",
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
