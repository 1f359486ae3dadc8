"""Arithmetic rule: line, tax, net and gross identities in :class:`~decimal.Decimal`.

A line's own allowances and charges (contract v3, EN 16931 BG-27/BG-28) enter its net
amount: quantity x unit price / price basis quantity (BT-149) - allowances + charges =
line amount (BT-131).
Document-level allowances and charges (contract v3, EN 16931 BG-20/BG-21) enter the
net and the tax bases as EN 16931 has them: net total (BT-109) = sum of line nets
(BT-106) - allowances (BT-107) + charges (BT-108), and each rate's base (BT-116) is its
lines' nets less its allowances plus its charges. A line, entry or tax line not subject
to VAT (contract v3, category ``O``) has no rate: its base is its own, its tax 0
(EN 16931 BR-O-08, BR-O-09).

Every computed amount is rounded explicitly per :class:`ValidationPolicy`
(``ROUND_HALF_UP`` to 2 places by default) and compared within ``tolerance``
(default 0); a failed identity adds one of :data:`ARITHMETIC_CODES`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal, localcontext

from pipeline.invoice import Extraction, Reason, ReasonCode
from pipeline.validation.policy import DEFAULT_POLICY, ValidationPolicy


def check_arithmetic(
    extraction: Extraction, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """Line = qty x unit price; sum(lines) - allowances + charges = net; per rate base
    (lines, allowances and charges at that rate) and tax; sum(tax) = tax total;
    net + tax = gross; each rounded per policy and compared within ``tolerance``.

    Identities with a missing side are skipped: presence already reported them.
    Tax is computed per rate on the rate's base (not per line), the EU invoicing
    norm; a rate of 0 needs no tax line.
    """
    reasons: list[Reason] = []
    tol = policy.tolerance

    def off(a: Decimal, b: Decimal) -> bool:
        return abs(a - b) > tol

    with localcontext() as ctx:
        ctx.prec = 60  # 15-digit quantity x 15-digit price stays exact
        bases: dict[Decimal | None, Decimal] = defaultdict(Decimal)  # None: category O
        for i, item in enumerate(extraction.line_items):
            basis = item.price_basis_quantity
            if basis is not None and basis > 0:
                adjusted_line = item.quantity * item.unit_price / basis
                terms = f" / {basis}"
            else:
                adjusted_line, terms = item.quantity * item.unit_price, ""
            for line_entry in item.allowances_charges:
                charge = line_entry.kind == "charge"
                adjusted_line += line_entry.amount if charge else -line_entry.amount
                terms += f" {'+' if charge else '-'} {line_entry.kind} {line_entry.amount}"
            expected = policy.round(adjusted_line)
            if off(expected, item.line_amount):
                reasons.append(
                    Reason(
                        ReasonCode.LINE_AMOUNT_MISMATCH,
                        f"line_items[{i}].line_amount",
                        f"{item.quantity} x {item.unit_price}{terms} = {expected}, "
                        f"stated {item.line_amount}",
                        rule="validation.line_amount_mismatch",
                    )
                )
            bases[item.tax_rate] += item.line_amount
        lines_sum = sum((item.line_amount for item in extraction.line_items), Decimal(0))
        adjusted, adjustments = lines_sum, ""
        for entry in extraction.allowances_charges:
            signed = entry.amount if entry.kind == "charge" else -entry.amount
            bases[entry.tax_rate] += signed
            adjusted += signed
            adjustments += f" {'+' if entry.kind == 'charge' else '-'} {entry.kind} {entry.amount}"
        if extraction.net_total is not None and extraction.line_items:
            if off(adjusted, extraction.net_total.value):
                stated = extraction.net_total.value
                sums = f"{lines_sum}{adjustments} = {adjusted}" if adjustments else f"{lines_sum}"
                reasons.append(
                    Reason(
                        ReasonCode.NET_TOTAL_MISMATCH,
                        "net_total",
                        f"sum of line amounts {sums}, stated {stated}",
                        rule="validation.net_total_mismatch",
                    )
                )
        by_rate: dict[Decimal | None, int] = {}
        for j, tax in enumerate(extraction.tax_lines):
            path = f"tax_lines[{j}]"
            if tax.rate in by_rate:
                reasons.append(
                    Reason(
                        ReasonCode.TAX_LINE_MISMATCH,
                        path,
                        f"{_at(tax.rate, '')} repeated",
                        rule="validation.tax_rate_repeated",
                    )
                )
                continue
            by_rate[tax.rate] = j
            # not subject to VAT (category O): no tax (BR-O-09)
            rated = Decimal(0) if tax.rate is None else tax.base * tax.rate / 100
            expected = policy.round(rated)
            if off(expected, tax.amount):
                reasons.append(
                    Reason(
                        ReasonCode.TAX_LINE_MISMATCH,
                        f"{path}.amount",
                        f"{tax.base} {_times(tax.rate)} = {expected}, stated {tax.amount}",
                        rule="validation.tax_line_mismatch",
                    )
                )
            at_rate = bases.get(tax.rate, Decimal(0))
            if extraction.line_items and off(at_rate, tax.base):
                reasons.append(
                    Reason(
                        ReasonCode.TAX_BASE_MISMATCH,
                        f"{path}.base",
                        f"lines{' and allowances/charges' if adjustments else ''} at "
                        f"{_at(tax.rate, '%', rate_word='')} sum to {at_rate}, "
                        f"stated {tax.base}",
                        rule="validation.tax_base_mismatch",
                    )
                )
        for rate, base in bases.items():
            if rate not in by_rate and rate != 0:
                reasons.append(
                    Reason(
                        ReasonCode.TAX_BASE_MISMATCH,
                        "tax_lines",
                        f"no tax line for {_at(rate, '%')} (lines sum to {base})",
                        rule="validation.tax_line_missing",
                    )
                )
        tax_sum = sum((t.amount for t in extraction.tax_lines), Decimal(0))
        if extraction.tax_total is not None:
            if off(tax_sum, extraction.tax_total.value):
                reasons.append(
                    Reason(
                        ReasonCode.TAX_TOTAL_MISMATCH,
                        "tax_total",
                        f"sum of tax lines {tax_sum}, stated {extraction.tax_total.value}",
                        rule="validation.tax_total_mismatch",
                    )
                )
        net, tax_total, gross = extraction.net_total, extraction.tax_total, extraction.gross_total
        if net is not None and tax_total is not None and gross is not None:
            if off(net.value + tax_total.value, gross.value):
                reasons.append(
                    Reason(
                        ReasonCode.GROSS_TOTAL_MISMATCH,
                        "gross_total",
                        f"{net.value} + {tax_total.value} = {net.value + tax_total.value}, "
                        f"stated {gross.value}",
                        rule="validation.gross_total_mismatch",
                    )
                )
        reasons += _amount_due(extraction, off)
    return reasons


def _at(rate: Decimal | None, percent: str, *, rate_word: str = "rate ") -> str:
    """``rate 19%`` (or as asked), ``category O`` for what has no rate (not subject to VAT)."""
    return "category O" if rate is None else f"{rate_word}{rate}{percent}"


def _times(rate: Decimal | None) -> str:
    return "not subject to VAT (category O)" if rate is None else f"x {rate}%"


def _amount_due(extraction: Extraction, off: Callable[[Decimal, Decimal], bool]) -> list[Reason]:
    """Gross total - prepaid amount + rounding amount = amount due (EN 16931 BR-CO-16),
    where the result states any of the three (contract v3)."""
    e = extraction
    prepaid, rounding, due = e.prepaid_amount, e.rounding_amount, e.amount_due
    if prepaid is None and rounding is None and due is None:
        return []
    gross = e.gross_total.value if e.gross_total is not None else None
    paid = prepaid.value if prepaid is not None else Decimal(0)
    rounded = rounding.value if rounding is not None else Decimal(0)
    if due is not None and gross is not None and not off(gross - paid + rounded, due.value):
        return []
    stated = "none" if due is None else str(due.value)
    return [
        Reason(
            ReasonCode.GROSS_TOTAL_MISMATCH,
            "amount_due",
            f"gross total {gross} - prepaid {paid} + rounding {rounded} = "
            f"{None if gross is None else gross - paid + rounded}, amount due stated {stated}",
            rule="validation.amount_due_mismatch",
        )
    ]
