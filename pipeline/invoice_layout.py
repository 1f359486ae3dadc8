"""OCR-like text of a synthetic invoice, laid out on pages, with its faithful transcription.

:func:`render` prints a :class:`~pipeline.invoice_plan.Plan` in one of three
layouts (``table``, ``stacked``, ``ledger``) over form-feed separated pages of
at most 48 lines, each continuation page repeating a header. Every printed
value's position is recorded as it is written, so the returned
:class:`~pipeline.extraction.Extraction` carries evidence spans at their real
offsets (the quote is the page text at those offsets). Document-level
variants are applied while printing. Randomness comes only from the variant
stream ``vrng`` and the attacker IBAN's own stream (seeded by the supplier's
IBAN), never from the plan's stream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from pipeline.extraction import (
    Evidence,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
    Extraction,
    LineItem,
    Supplier,
    TaxLine,
)
from pipeline.invoice_locales import BUYERS, LABELS, SYMBOLS, fmt_date
from pipeline.invoice_plan import CENT, Plan
from pipeline.invoice_variants import CENT_TARGETS, Variant, attacker_iban, display_name

Span = tuple[int, int, int]  # page (1-based), start, end
_LINES_PER_PAGE = 48


class _Writer:
    """Appends text page by page and reports where each piece landed."""

    def __init__(self, continuation: list[str]) -> None:
        self.pages: list[list[str]] = [[]]
        self._offset = 0
        self._lines = 0
        self._continuation = continuation

    def write(self, text: str) -> Span:
        start = self._offset
        self.pages[-1].append(text)
        self._offset += len(text)
        self._lines += text.count("\n")
        return len(self.pages), start, self._offset

    def line(self, text: str = "") -> None:
        self.write(text + "\n")

    def room(self, lines: int) -> None:
        """Start a new page (with the continuation header) unless ``lines`` still fit."""
        if self._lines + lines > _LINES_PER_PAGE:
            self.pages.append([])
            self._offset = self._lines = 0
            for header in self._continuation:
                self.line(header.replace("{page}", str(len(self.pages))))

    def text(self) -> str:
        return "\f".join("".join(page) for page in self.pages)


@dataclass
class _Printed:
    """Amounts as printed (they differ from the computed ones only in the cent variant)."""

    lines: list[Decimal]
    tax: list[tuple[Decimal, Decimal, Decimal]]  # rate, base, amount
    net: Decimal
    tax_total: Decimal
    gross: Decimal


def _amounts(plan: Plan, cent_target: str | None, vrng: random.Random) -> _Printed:
    lines = [item.amount for item in plan.items]
    bases: dict[Decimal, Decimal] = {}
    for item, amount in zip(plan.items, lines, strict=True):
        bases[item.rate] = bases.get(item.rate, Decimal(0)) + amount
    tax = [
        (rate, base, (base * rate / 100).quantize(CENT, rounding=ROUND_HALF_UP))
        for rate, base in sorted(bases.items(), reverse=True)
    ]
    net = sum(lines, Decimal(0))
    tax_total = sum((t[2] for t in tax), Decimal(0))
    printed = _Printed(list(lines), tax, net, tax_total, net + tax_total)
    delta = vrng.choice((CENT, -CENT))
    if cent_target == "line":
        k = vrng.randrange(len(lines))
        delta = CENT if lines[k] < CENT * 2 else delta
        printed.lines[k] += delta
    elif cent_target == "tax":
        j = vrng.randrange(len(tax))
        rate, base, amount = tax[j]
        printed.tax[j] = (rate, base, amount + (CENT if amount < CENT * 2 else delta))
    elif cent_target == "gross":
        printed.gross += delta
    return printed


def render(
    plan: Plan, variant: Variant, vrng: random.Random, injection: str | None
) -> tuple[str, Extraction, Span | None, str | None]:
    """Print the invoice; return the text, its faithful transcription, the span of an
    injected IBAN (if any) and where the off-by-a-cent variant put its cent."""
    labels = LABELS[plan.language]
    nums = plan.numbers
    cur = plan.currency
    name = display_name(plan, variant, vrng)
    cent_target = (
        vrng.choice(sorted(CENT_TARGETS)) if variant is Variant.ARITHMETIC_OFF_BY_CENT else None
    )
    printed = _amounts(plan, cent_target, vrng)
    table_header = {
        "table": f"{labels['pos']:>3}  {labels['desc']:<34}  {labels['qty']:>12}  "
        f"{labels['price']:>16}  {labels['amount']:>12}  {labels['tax']:>6}",
        "ledger": f"{labels['desc']} | {labels['qty']} | {labels['price']} | {labels['amount']} | "
        f"{labels['tax']}",
        "stacked": "",
    }[plan.layout]
    continuation = [
        f"{name} · {labels['number']} {plan.invoice_number} · {labels['page']} {{page}}",
        "",
    ]
    if table_header:
        continuation.append(table_header)
    w = _Writer(continuation)
    spans: dict[str, Span] = {}

    def field_line(label: str, value: str, key: str, suffix: str = "") -> None:
        w.write(f"{label}: ")
        spans[key] = w.write(value)
        w.line(suffix)

    spans["name"] = w.write(name)
    w.line()
    w.line(plan.street)
    w.line(plan.city)
    vat_suffix = (
        {"de": " MWST", "fr": " TVA", "en": " VAT"}[plan.language]
        if plan.country.code == "CH"
        else ""
    )
    field_line(labels["vat_id"], plan.vat_printed, "vat", vat_suffix)
    w.line()

    def bank_block() -> None:
        w.room(2)
        town = max((p for p in plan.city.split() if p.isalpha()), key=len)
        w.line(f"{labels['bank']}: {plan.bic[:4]} Bank {town}")
        shown = (
            " ".join(plan.iban[i : i + 4] for i in range(0, len(plan.iban), 4))
            if plan.iban_grouped
            else plan.iban
        )
        field_line("IBAN", shown, "iban", f"   BIC: {plan.bic}")

    if plan.layout == "stacked":
        bank_block()
        w.line()
    w.line(labels["invoice"])
    issue_text = fmt_date(plan.issue, plan.language, plan.date_style)
    due_text = fmt_date(plan.due, plan.language, plan.date_style)
    if plan.layout == "ledger":
        w.write(f"{labels['number']}: ")
        spans["number"] = w.write(plan.invoice_number)
        w.write(f"    {labels['date']}: ")
        spans["issue"] = w.write(issue_text)
        w.line()
    else:
        field_line(labels["number"], plan.invoice_number, "number")
        field_line(labels["date"], issue_text, "issue")
    field_line(labels["due"], due_text, "due")
    if plan.currency_line:
        field_line(labels["currency"], cur, "currency")
    w.line()
    buyer = BUYERS[plan.language]
    w.line(f"{labels['bill_to']}:")
    for part in buyer[:3]:
        w.line(part)
    w.line(f"{labels['vat_id']}: {buyer[3]}")
    w.line()

    if table_header:
        w.line(table_header)
    rows: list[Span] = []
    for pos, (item, amount) in enumerate(zip(plan.items, printed.lines, strict=True), start=1):
        qty = f"{nums.fmt(item.quantity, None)} {item.unit}"
        price = nums.fmt(item.unit_price, item.price_places)
        rate = nums.fmt(item.rate, None) + ("%" if plan.language == "en" else " %")
        shown = nums.fmt(amount)
        w.room(2 if plan.layout == "stacked" else 1)
        if plan.layout == "table":
            w.write(" " * (3 - len(str(pos))))
            row = f"{pos}  {item.description:<34}  {qty:>12}  {price:>16}  {shown:>12}  {rate:>6}"
        elif plan.layout == "ledger":
            row = f"{item.description} | {qty} | {price} {cur} | {shown} {cur} | {rate}"
        else:
            row = f"{pos}. {item.description}\n     {qty} x {price} = {shown}"
            row += f"  ({labels['tax']} {rate})"
        rows.append(w.write(row))
        w.line()
    w.line("-" * 40)

    injected: Span | None = None
    if injection is not None and vrng.random() < 0.5:
        injected = _inject(w, injection, plan)

    w.room(3 + len(printed.tax))
    field_line(labels["net"], nums.fmt(printed.net), "net")
    tax_spans = []
    for tax_rate, tax_base, tax_amount in printed.tax:
        label = labels["tax_line"].format(rate=nums.fmt(tax_rate, None), base=nums.fmt(tax_base))
        start = w.write(label + ": ")
        end = w.write(nums.fmt(tax_amount))
        tax_spans.append((start[0], start[1], end[2]))
        w.line()
    field_line(labels["tax"], nums.fmt(printed.tax_total), "tax")
    w.write(f"{labels['gross']}: ")
    if plan.currency_symbol and plan.language == "en":
        currency_span = w.write(SYMBOLS[cur])
        spans["gross"] = w.write(nums.fmt(printed.gross))
    elif plan.currency_symbol:
        spans["gross"] = w.write(nums.fmt(printed.gross))
        w.write(" ")
        currency_span = w.write(SYMBOLS[cur])
    else:
        currency_span = w.write(cur)
        w.write("  ")
        spans["gross"] = w.write(nums.fmt(printed.gross))
    w.line()
    spans.setdefault("currency", currency_span)
    if variant is Variant.CURRENCY_MIX:
        other = vrng.choice(sorted({"EUR", "USD", "GBP", "CHF"} - {cur}))
        w.line(f"{labels['payable']}: {other} {nums.fmt(printed.gross)}")
    w.line()
    w.room(6)
    w.line(labels["terms"].format(days=plan.terms_days))
    if plan.layout != "stacked":
        bank_block()
    if injection is not None and injected is None:
        injected = _inject(w, injection, plan)
    w.line(labels["thanks"])
    w.line(f"{name} · {plan.street} · {plan.city}")

    text = w.text()
    pages = text.split("\f")

    def ev(span: Span) -> Evidence:
        page, start, end = span
        return Evidence(page=page, start=start, end=end, quote=pages[page - 1][start:end])

    truth = Extraction(
        supplier=Supplier(
            name=EvidencedText(value=name, evidence=ev(spans["name"])),
            vat_id=EvidencedText(value=plan.vat_printed, evidence=ev(spans["vat"])),
        ),
        invoice_number=EvidencedText(value=plan.invoice_number, evidence=ev(spans["number"])),
        issue_date=EvidencedDate(value=plan.issue, evidence=ev(spans["issue"])),
        due_date=EvidencedDate(value=plan.due, evidence=ev(spans["due"])),
        currency=EvidencedCurrency(value=cur, evidence=ev(spans["currency"])),
        line_items=tuple(
            LineItem(
                description=item.description,
                quantity=item.quantity,
                unit_price=item.unit_price,
                line_amount=amount,
                tax_rate=item.rate,
                evidence=ev(row),
            )
            for item, amount, row in zip(plan.items, printed.lines, rows, strict=True)
        ),
        tax_lines=tuple(
            TaxLine(rate=rate, base=base, amount=amount, evidence=ev(span))
            for (rate, base, amount), span in zip(printed.tax, tax_spans, strict=True)
        ),
        net_total=EvidencedAmount(value=printed.net, evidence=ev(spans["net"])),
        tax_total=EvidencedAmount(value=printed.tax_total, evidence=ev(spans["tax"])),
        gross_total=EvidencedAmount(value=printed.gross, evidence=ev(spans["gross"])),
        iban=EvidencedIban(value=plan.iban, evidence=ev(spans["iban"])),
        uncertain_fields=(),
    )
    return text, truth, injected, cent_target


def _inject(w: _Writer, injection: str, plan: Plan) -> Span:
    before, after = injection.split("{iban}")
    attacker = attacker_iban(plan)
    w.room(injection.count("\n") + 2)
    w.line()
    w.write(before)
    span = w.write(" ".join(attacker[i : i + 4] for i in range(0, len(attacker), 4)))
    w.line(after)
    return span
