"""OCR-like text of a synthetic invoice, laid out on pages, with its faithful transcription.

:func:`render` prints a :class:`~benchmarks.invoices.plan.Plan` in one of the
layout families of :data:`~benchmarks.invoices.style.LAYOUTS` (``table``,
``stacked``, ``ledger``, ``keyvalue``, ``prose``, ``columns``) over form-feed
separated pages of at most 48 lines, each continuation page repeating a header.
The blocks themselves are printed by :mod:`benchmarks.invoices.blocks`. Every printed
value's position is recorded as it is written, so the returned
:class:`~pipeline.invoice.Extraction` carries evidence spans at their real
offsets (the quote is the page text at those offsets). Document-level
variants are applied while printing. Randomness comes only from the variant
stream ``vrng`` and the attacker IBAN's own stream (seeded by the supplier's
IBAN), never from the plan's stream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from benchmarks.invoices.blocks import Sheet, Span, Writer, meta_values
from benchmarks.invoices.locales import fmt_date
from benchmarks.invoices.plan import CENT, Item, Plan
from benchmarks.invoices.variants import CENT_TARGETS, Variant, attacker_iban, display_name
from pipeline.invoice import (
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
    sheet = Sheet(plan, display_name(plan, variant, vrng))
    labels, w = sheet.labels, sheet.w
    cent_target = (
        vrng.choice(sorted(CENT_TARGETS)) if variant is Variant.ARITHMETIC_OFF_BY_CENT else None
    )
    printed = _amounts(plan, cent_target, vrng)
    table_header = _table_header(sheet)
    w.continuation = [
        f"{sheet.name} · {labels['number']} {plan.invoice_number} · {labels['page']} {{page}}",
        "",
    ]
    if table_header:
        w.continuation.append(table_header)

    sheet.letterhead()
    if plan.layout == "stacked":
        sheet.bank_block()
        w.line()
    issue_text = fmt_date(plan.issue, plan.language, plan.date_style)
    due_text = fmt_date(plan.due, plan.language, plan.date_style)
    if plan.style.buyer_first:
        sheet.buyer_block()
    indent = plan.style.column if plan.layout == "columns" else 0
    w.line(" " * indent + labels["invoice"])
    _meta(sheet, issue_text, due_text, indent)
    w.line()
    if not plan.style.buyer_first:
        sheet.buyer_block()

    if table_header:
        w.line(table_header)
    for pos, (item, amount) in enumerate(zip(plan.items, printed.lines, strict=True), start=1):
        w.room(2 if plan.layout == "stacked" else 1)
        sheet.rows.append(_row(sheet, pos, item, amount))
        w.line()
    w.line("-" * 40)

    injected: Span | None = None
    if injection is not None and vrng.random() < 0.5:
        injected = _inject(w, injection, plan)

    w.room(4 + len(printed.tax))
    _totals(sheet, printed)
    if variant is Variant.CURRENCY_MIX:
        other = vrng.choice(sorted({"EUR", "USD", "GBP", "CHF"} - {plan.currency}))
        w.line(f"{labels['payable']}: {other} {plan.numbers.fmt(printed.gross)}")
    w.line()
    w.room(8 + len(plan.style.footer))
    w.line(labels["terms"].format(days=plan.terms_days))
    if plan.layout != "stacked":
        sheet.bank_block()
    if injection is not None and injected is None:
        injected = _inject(w, injection, plan)
    w.line()
    sheet.footer()
    return w.text(), _truth(sheet, printed), injected, cent_target


def _table_header(sheet: Sheet) -> str:
    labels = sheet.labels
    match sheet.plan.layout:
        case "table" | "keyvalue":
            return (
                f"{labels['pos']:>3}  {labels['desc']:<34}  {labels['qty']:>12}  "
                f"{labels['price']:>16}  {labels['amount']:>12}  {labels['tax']:>6}"
            )
        case "columns":
            return (
                f"{labels['desc']:<36}{labels['qty']:>12}{labels['price']:>16}"
                f"{labels['tax']:>8}{labels['amount']:>14}"
            )
        case "ledger":
            return (
                f"{labels['desc']} | {labels['qty']} | {labels['price']} | {labels['amount']} | "
                f"{labels['tax']}"
            )
        case _:
            return ""


def _meta(sheet: Sheet, issue: str, due: str, indent: int) -> None:
    """The invoice fields and decoys as the layout family sets them."""
    plan, labels, w = sheet.plan, sheet.labels, sheet.w
    values = meta_values(sheet, issue, due)
    if plan.layout == "prose":
        sheet.template(
            labels["intro"],
            {
                "number": [(plan.invoice_number, "number")],
                "issue": [(issue, "issue")],
                "due": [(due, "due")],
            },
        )
        w.line()
        rest = [(label, value, key) for label, value, key in values if key in (None, "currency")]
        for label, value, key in rest:
            sheet.field(label, value, key)
        return
    if plan.layout == "keyvalue":
        for label, value, key in values:
            sheet.aligned(label, [(value, key)])
        return
    if plan.layout == "ledger":
        number, issue_field = (next(v for v in values if v[2] == k) for k in ("number", "issue"))
        sep = plan.style.sep or ": "
        sheet.pieces(
            [
                (f"{number[0]}{sep}", None),
                (number[1], "number"),
                (f"    {issue_field[0]}{sep}", None),
                (issue_field[1], "issue"),
            ]
        )
        w.line()
        values = [v for v in values if v[2] not in ("number", "issue")]
    for label, value, key in values:
        sheet.field(label, value, key, indent)


def _row(sheet: Sheet, pos: int, item: Item, amount: Decimal) -> Span:
    """One line item as printed; its span is the row's evidence."""
    plan, nums, labels = sheet.plan, sheet.plan.numbers, sheet.labels
    qty = f"{nums.fmt(item.quantity, None)} {item.unit}"
    price = nums.fmt(item.unit_price, item.price_places)
    rate, shown, cur = sheet.rate(item.rate), nums.fmt(amount), plan.currency
    match plan.layout:
        case "table" | "keyvalue":
            sheet.w.write(" " * (3 - len(str(pos))))
            row = f"{pos}  {item.description:<34}  {qty:>12}  {price:>16}  {shown:>12}  {rate:>6}"
        case "columns":
            row = f"{item.description:<36}{qty:>12}{price:>16}{rate:>8}{shown:>14}"
        case "ledger":
            row = f"{item.description} | {qty} | {price} {cur} | {shown} {cur} | {rate}"
        case "prose":
            sheet.w.write(plan.style.bullet)
            return sheet.template(
                labels["item"],
                {
                    "qty": [(qty, None)],
                    "desc": [(item.description, None)],
                    "price": [(price, None)],
                    "amount": [(shown, None)],
                    "tax": [(labels["tax"], None)],
                    "rate": [(rate, None)],
                },
            )
        case _:
            row = f"{pos}. {item.description}\n     {qty} x {price} = {shown}"
            row += f"  ({labels['tax']} {rate})"
    return sheet.w.write(row)


def _totals(sheet: Sheet, printed: _Printed) -> None:
    """Net, tax lines, tax total and gross (with the currency) as the layout family sets them."""
    plan, labels, nums, w = sheet.plan, sheet.labels, sheet.plan.numbers, sheet.w
    box = plan.layout in ("keyvalue", "columns")
    indent = plan.style.column if plan.layout == "columns" else 0
    if plan.layout == "prose":
        sheet.template(labels["net_s"], {"net": [(nums.fmt(printed.net), "net")]})
        w.line()
    elif box:
        sheet.aligned(labels["net"], [(nums.fmt(printed.net), "net")], indent)
    else:
        sheet.field(labels["net"], nums.fmt(printed.net), "net")
    for rate, base, amount in printed.tax:
        label = labels["tax_line"].format(rate=sheet.rate(rate), base=nums.fmt(base))
        if box:
            sheet.tax_spans.append(sheet.aligned(label, [(nums.fmt(amount), None)], indent))
            continue
        sheet.tax_spans.append(sheet.pieces([(label + ": ", None), (nums.fmt(amount), None)]))
        w.line("." if plan.layout == "prose" else "")
    gross = sheet.gross_pieces(printed.gross)
    if plan.layout == "prose":
        sheet.template(labels["tax_s"], {"tax": [(nums.fmt(printed.tax_total), "tax")]})
        w.line()
        sheet.template(labels["gross_s"], {"gross": gross})
    elif box:
        sheet.aligned(labels["tax_total"], [(nums.fmt(printed.tax_total), "tax")], indent)
        sheet.aligned(labels["gross"], gross, indent)
        return
    else:
        sheet.field(labels["tax_total"], nums.fmt(printed.tax_total), "tax")
        sheet.pieces([(labels["gross"] + (plan.style.sep or ": "), None), *gross])
    w.line()


def _truth(sheet: Sheet, printed: _Printed) -> Extraction:
    """The faithful transcription: every value with the span it was printed at."""
    plan, spans = sheet.plan, sheet.spans
    spans.setdefault("currency", spans["gross_currency"])
    pages = sheet.w.text().split("\f")

    def ev(span: Span) -> Evidence:
        page, start, end = span
        return Evidence(page=page, start=start, end=end, quote=pages[page - 1][start:end])

    return Extraction(
        supplier=Supplier(
            name=EvidencedText(value=sheet.name, evidence=ev(spans["name"])),
            vat_id=EvidencedText(value=plan.vat_printed, evidence=ev(spans["vat"])),
        ),
        invoice_number=EvidencedText(value=plan.invoice_number, evidence=ev(spans["number"])),
        issue_date=EvidencedDate(value=plan.issue, evidence=ev(spans["issue"])),
        due_date=EvidencedDate(value=plan.due, evidence=ev(spans["due"])),
        currency=EvidencedCurrency(value=plan.currency, evidence=ev(spans["currency"])),
        line_items=tuple(
            LineItem(
                description=item.description,
                quantity=item.quantity,
                unit_price=item.unit_price,
                line_amount=amount,
                tax_rate=item.rate,
                evidence=ev(row),
            )
            for item, amount, row in zip(plan.items, printed.lines, sheet.rows, strict=True)
        ),
        tax_lines=tuple(
            TaxLine(rate=rate, base=base, amount=amount, evidence=ev(span))
            for (rate, base, amount), span in zip(printed.tax, sheet.tax_spans, strict=True)
        ),
        net_total=EvidencedAmount(value=printed.net, evidence=ev(spans["net"])),
        tax_total=EvidencedAmount(value=printed.tax_total, evidence=ev(spans["tax"])),
        gross_total=EvidencedAmount(value=printed.gross, evidence=ev(spans["gross"])),
        iban=EvidencedIban(value=plan.iban, evidence=ev(spans["iban"])),
        uncertain_fields=(),
    )


def _inject(w: Writer, injection: str, plan: Plan) -> Span:
    before, after = injection.split("{iban}")
    attacker = attacker_iban(plan)
    w.room(injection.count("\n") + 2)
    w.line()
    w.write(before)
    span = w.write(" ".join(attacker[i : i + 4] for i in range(0, len(attacker), 4)))
    w.line(after)
    return span
