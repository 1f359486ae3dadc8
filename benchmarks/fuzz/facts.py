"""What a generated invoice states, taken apart so the fuzzer can print it again.

:class:`Facts` holds the truth's values (from the generator's ``truth``) and the few
printed forms a re-rendering must keep (the supplier's name, VAT id and IBAN as the
generator printed them, its decimal mark and thousands separator), nothing of the
generator's layout. A transformation may change a fact only together with the truth
(:meth:`Facts.replace`): the re-rendered document and its truth are built from the
same :class:`Facts`, so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from benchmarks.invoices import GeneratedInvoice
from pipeline.invoice import TenantMasterData


@dataclass(frozen=True)
class Item:
    description: str
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal
    rate: Decimal


@dataclass(frozen=True)
class TaxRow:
    rate: Decimal
    base: Decimal
    amount: Decimal


@dataclass(frozen=True)
class Facts:
    """One invoice's values and the printed forms a re-rendering keeps."""

    seed: int
    language: str
    currency: str
    decimal: str  # "," or "."
    group: str  # thousands separator as printed ("" where the generator grouped none)
    supplier_printed: str
    supplier_name: str
    vat_printed: str
    vat_id: str
    address: tuple[str, ...]
    number: str
    issue: date
    due: date | None
    #: Days from issue to due date where a payment term can state it (else None).
    term_days: int | None
    iban: str | None
    iban_printed: str | None
    items: tuple[Item, ...]
    taxes: tuple[TaxRow, ...]
    net: Decimal
    tax: Decimal
    gross: Decimal
    master_data: TenantMasterData
    today: date

    def replace(self, **changes: object) -> Facts:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _marks(printed_amounts: list[str]) -> tuple[str, str]:
    """Decimal mark and thousands separator as the generator printed its totals."""
    decimal, group = ".", ""
    for quote in printed_amounts:
        m = re.search(r"([.,])\d{2}$", quote)
        if m:
            decimal = m.group(1)
            head = quote[: m.start()]
            seps = {ch for ch in head if not ch.isdigit() and ch not in "-+"}
            if seps:
                group = seps.pop()
            break
    return decimal, group


def _address(text: str, name_end: int, vat_quote: str) -> tuple[str, ...]:
    """Up to three lines under the supplier's name, left column only, before its VAT id."""
    lines: list[str] = []
    for raw in text[name_end:].split("\n")[1:4]:
        line = re.split(r"\s{3,}", raw.strip())[0]
        if not line or vat_quote in raw or len(line) > 48:
            break
        lines.append(line)
    return tuple(lines)


def _rated(rate: Decimal | None) -> Decimal:
    """A generated invoice's rate: the generator writes every row with one (category O,
    which has none, is an e-invoice reader's only)."""
    if rate is None:
        raise ValueError("a generated invoice states every rate")
    return rate


def facts_of(invoice: GeneratedInvoice) -> Facts:
    """The facts of one generated invoice (a clean one: its truth needs no review)."""
    t = invoice.truth
    assert t.supplier.name and t.supplier.vat_id and t.invoice_number and t.issue_date
    assert t.net_total and t.tax_total and t.gross_total and t.currency
    page1 = invoice.ocr_text.split("\f")[0]
    due = t.due_date.value if t.due_date else None
    term = (due - t.issue_date.value).days if due else None
    return Facts(
        seed=invoice.seed,
        language=invoice.language,
        currency=t.currency.value,
        decimal=(marks := _marks([t.gross_total.evidence.quote, t.net_total.evidence.quote]))[0],
        group=marks[1],
        supplier_printed=t.supplier.name.evidence.quote,
        supplier_name=t.supplier.name.value,
        vat_printed=t.supplier.vat_id.evidence.quote,
        vat_id=t.supplier.vat_id.value,
        address=_address(page1, t.supplier.name.evidence.end, t.supplier.vat_id.evidence.quote),
        number=t.invoice_number.value,
        issue=t.issue_date.value,
        due=due,
        term_days=term if term and 0 < term <= 120 else None,
        iban=t.iban.value if t.iban else None,
        iban_printed=t.iban.evidence.quote if t.iban else None,
        items=tuple(
            Item(i.description, i.quantity, i.unit_price, i.line_amount, _rated(i.tax_rate))
            for i in t.line_items
        ),
        taxes=tuple(TaxRow(_rated(x.rate), x.base, x.amount) for x in t.tax_lines),
        net=t.net_total.value,
        tax=t.tax_total.value,
        gross=t.gross_total.value,
        master_data=invoice.master_data,
        today=invoice.today,
    )


def number_digits(number: str, year: int) -> str:
    """The serial part of an invoice number: its last run of digits that is not the year."""
    runs = [r for r in re.findall(r"\d+", number) if r != str(year)]
    return runs[-1] if runs else "1"
