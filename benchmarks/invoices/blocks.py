"""The printed blocks of a synthetic invoice, per layout family, with their evidence spans.

:class:`Sheet` writes onto a :class:`Writer` (pages of at most 48 lines,
form-feed separated, each continuation page repeating a header) and records
the span of every value the truth cites as it is written, so evidence offsets
are exact by construction. Which block is printed how depends on the plan's
layout family and :class:`~benchmarks.invoices.style.Style`; the order of the
blocks is :func:`benchmarks.invoices.layout.render`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from benchmarks.invoices.locales import SYMBOLS
from benchmarks.invoices.plan import Plan

Span = tuple[int, int, int]  # page (1-based), start, end
LINES_PER_PAGE = 48
_CH_VAT_SUFFIX = {"de": " MWST", "fr": " TVA", "en": " VAT", "it": " IVA"}
_FIELD_RE = re.compile(r"\{(\w+)\}")


class Writer:
    """Appends text page by page and reports where each piece landed."""

    def __init__(self) -> None:
        self.pages: list[list[str]] = [[]]
        self._offset = 0
        self._lines = 0
        self.continuation: list[str] = []

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
        if self._lines + lines > LINES_PER_PAGE:
            self.pages.append([])
            self._offset = self._lines = 0
            for header in self.continuation:
                self.line(header.replace("{page}", str(len(self.pages))))

    def text(self) -> str:
        return "\f".join("".join(page) for page in self.pages)


Piece = tuple[str, str | None]  # text, span key (None: not evidence)


@dataclass
class Sheet:
    """One invoice being printed: the writer, the plan and the spans recorded so far."""

    plan: Plan
    name: str  # the supplier name as displayed (variants may change it)
    w: Writer = field(default_factory=Writer)
    spans: dict[str, Span] = field(default_factory=dict)
    rows: list[Span] = field(default_factory=list)
    tax_spans: list[Span] = field(default_factory=list)

    @property
    def labels(self) -> dict[str, str]:
        return self.plan.style.labels

    def pieces(self, pieces: list[Piece]) -> Span:
        """Write ``pieces``, recording each keyed one; return the span of them all."""
        first = last = self.w.write("")
        for text, key in pieces:
            last = self.w.write(text)
            if key is not None:
                self.spans[key] = last
        return first[0], first[1], last[2]

    def field(self, label: str, value: str, key: str | None, indent: int = 0) -> None:
        self.pieces([(" " * indent + label + self.plan.style.sep, None), (value, key)])
        self.w.line()

    def aligned(self, label: str, pieces: list[Piece], indent: int = 0) -> Span:
        """``label`` at ``indent``, the value right-aligned to the style's width."""
        style = self.plan.style
        value_len = sum(len(text) for text, _ in pieces)
        right = max(style.width, indent + 44)
        pad = max(2, right - indent - len(label) - value_len)
        start = self.w.write(" " * indent + label)
        end = self.pieces([(" " * pad, None), *pieces])
        self.w.line()
        return start[0], start[1] + indent, end[2]

    def template(self, template: str, values: dict[str, list[Piece]]) -> Span:
        """Write a sentence with ``{field}`` placeholders filled by (possibly keyed) pieces."""
        out: list[Piece] = []
        at = 0
        for match in _FIELD_RE.finditer(template):
            out.append((template[at : match.start()], None))
            out += values[match.group(1)]
            at = match.end()
        out.append((template[at:], None))
        return self.pieces(out)

    # --- values as printed ----------------------------------------------------------------

    def rate(self, rate: Decimal) -> str:
        return self.plan.numbers.fmt(rate, None) + self.plan.style.percent

    def gross_pieces(self, gross: Decimal) -> list[Piece]:
        """The gross total with its currency (code or symbol, before or after)."""
        plan, amount = self.plan, self.plan.numbers.fmt(gross)
        if plan.currency_symbol and plan.language == "en":
            return [(SYMBOLS[plan.currency], "gross_currency"), (amount, "gross")]
        if plan.currency_symbol:
            return [(amount, "gross"), (" ", None), (SYMBOLS[plan.currency], "gross_currency")]
        return [(plan.currency, "gross_currency"), ("  ", None), (amount, "gross")]

    # --- blocks ---------------------------------------------------------------------------

    def supplier_lines(self) -> list[list[Piece]]:
        plan, labels = self.plan, self.labels
        suffix = _CH_VAT_SUFFIX.get(plan.language, "") if plan.country.code == "CH" else ""
        lines: list[list[Piece]] = [[(self.name, "name")], [(plan.street, None)]]
        lines.append([(plan.city, None)])
        if plan.style.phone:
            lines.append([(f"{labels['phone']}{plan.style.sep or ': '}{plan.style.phone}", None)])
        sep = plan.style.sep or ": "
        lines.append([(labels["vat_id"] + sep, None), (plan.vat_printed, "vat"), (suffix, None)])
        return lines

    def buyer_lines(self) -> list[str]:
        name, street, city, vat = self.plan.style.buyer
        sep = self.plan.style.sep or ": "
        return [
            f"{self.labels['bill_to']}:",
            name,
            street,
            city,
            f"{self.labels['vat_id']}{sep}{vat}",
        ]

    def letterhead(self) -> None:
        """Supplier block; in ``columns`` the customer block beside it on the same lines."""
        left = self.supplier_lines()
        if self.plan.layout != "columns":
            for parts in left:
                self.pieces(parts)
                self.w.line()
            self.w.line()
            return
        right = self.buyer_lines()
        widest = max(sum(len(text) for text, _ in parts) for parts in left)
        column = max(self.plan.style.column, widest + 3)
        for i in range(max(len(left), len(right))):
            parts = left[i] if i < len(left) else []
            width = sum(len(text) for text, _ in parts)
            self.pieces(parts)
            if i < len(right):
                self.w.write(" " * max(3, column - width) + right[i])
            self.w.line()
        self.w.line()

    def buyer_block(self) -> None:
        if self.plan.layout == "columns":
            return
        for text in self.buyer_lines():
            self.w.line(text)
        self.w.line()

    def bank_block(self) -> None:
        plan = self.plan
        self.w.room(2)
        shown = (
            " ".join(plan.iban[i : i + 4] for i in range(0, len(plan.iban), 4))
            if plan.iban_grouped
            else plan.iban
        )
        if plan.layout == "prose":
            self.template(
                self.labels["bank_s"], {"iban": [(shown, "iban")], "bic": [(plan.bic, None)]}
            )
            self.w.line()
            return
        town = max((p for p in plan.city.split() if p.isalpha()), key=len)
        self.w.line(f"{self.labels['bank']}: {plan.bic[:4]} Bank {town}")
        self.pieces([("IBAN: ", None), (shown, "iban"), (f"   BIC: {plan.bic}", None)])
        self.w.line()

    def footer(self) -> None:
        plan = self.plan
        self.w.line(self.labels["thanks"])
        self.w.line(f"{self.name} · {plan.street} · {plan.city}")
        for text in plan.style.footer:
            self.w.line(text)


def meta_values(sheet: Sheet, issue: str, due: str) -> list[tuple[str, str, str | None]]:
    """(label, value, span key) of the invoice fields and decoys, in the style's order."""
    labels, style = sheet.labels, sheet.plan.style
    known: dict[str, tuple[str, str, str | None]] = {
        "number": (labels["number"], sheet.plan.invoice_number, "number"),
        "issue": (labels["date"], issue, "issue"),
        "due": (labels["due"], due, "due"),
    }
    for key, value in style.decoys.items():
        known[key] = (labels[key], value, None)
    out = [known[key] for key in style.meta_order]
    if sheet.plan.currency_line:
        out.append((labels["currency"], sheet.plan.currency, "currency"))
    return out


TaxLine = tuple[Decimal, Decimal, Decimal]  # rate, base, amount
Printer = Callable[[Sheet], None]
