"""The truth of a fuzzed invoice as an :class:`~pipeline.validation.Extraction` whose
evidence sits at the real offsets of the printed text.

For the fuzzer's own renderings the spans come from the renderer
(:class:`~benchmarks.fuzz.render.Printed`); for the generator's untouched text they are
found by :func:`locate` (each printed string searched in the text), which the tests
check against the generator's own truth: ``answer_for`` gives the same answer for both.
Invariant: every evidence ``quote`` equals ``page_text[start:end]``.
"""

from __future__ import annotations

from typing import TypeVar

from benchmarks.fuzz.facts import Facts
from benchmarks.fuzz.render import Printed
from benchmarks.fuzz.sheet import Span
from benchmarks.invoices import GeneratedInvoice
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

_Node = TypeVar(
    "_Node", EvidencedText, EvidencedDate, EvidencedAmount, EvidencedCurrency, EvidencedIban
)


def _evidence(text: str, span: Span) -> Evidence:
    page, start, end = span
    return Evidence(page=page, start=start, end=end, quote=text.split("\f")[page - 1][start:end])


def truth_of(facts: Facts, printed: Printed) -> Extraction:
    """The extraction a faithful reader of ``printed`` returns (first span of each key)."""

    def ev(key: str) -> Evidence:
        spans = printed.spans.get(key)
        if not spans:
            raise ValueError(f"{key} is not printed")
        return _evidence(printed.text, spans[0])

    due = None
    if facts.due is not None:
        due = EvidencedDate(value=facts.due, evidence=ev("due_date"))
    iban = None
    if facts.iban is not None:
        iban = EvidencedIban(value=facts.iban, evidence=ev("iban"))
    return Extraction(
        supplier=Supplier(
            name=EvidencedText(value=facts.supplier_name, evidence=ev("supplier")),
            vat_id=EvidencedText(value=facts.vat_id, evidence=ev("vat_id")),
        ),
        invoice_number=EvidencedText(value=facts.number, evidence=ev("number")),
        issue_date=EvidencedDate(value=facts.issue, evidence=ev("issue_date")),
        due_date=due,
        currency=EvidencedCurrency(value=facts.currency, evidence=ev("currency")),
        line_items=tuple(
            LineItem(
                description=item.description,
                quantity=item.quantity,
                unit_price=item.unit_price,
                line_amount=item.amount,
                tax_rate=item.rate,
                evidence=ev(f"item:{i}"),
            )
            for i, item in enumerate(facts.items)
        ),
        tax_lines=tuple(
            TaxLine(rate=t.rate, base=t.base, amount=t.amount, evidence=ev(f"taxline:{j}"))
            for j, t in enumerate(facts.taxes)
        ),
        net_total=EvidencedAmount(value=facts.net, evidence=ev("net")),
        tax_total=EvidencedAmount(value=facts.tax, evidence=ev("tax")),
        gross_total=EvidencedAmount(value=facts.gross, evidence=ev("gross")),
        iban=iban,
        uncertain_fields=(),
    )


def locate(text: str, quote: str, after: tuple[int, int] = (1, 0)) -> Span:
    """Where ``quote`` is first printed at or after ``(page, offset)``.

    Raises:
        ValueError: the quote is not printed there.
    """
    pages = text.split("\f")
    first_page, offset = after
    for page_no in range(first_page, len(pages) + 1):
        start = pages[page_no - 1].find(quote, offset if page_no == first_page else 0)
        if start >= 0:
            return page_no, start, start + len(quote)
    raise ValueError(f"{quote!r} is not printed after page {first_page} offset {offset}")


def located_truth(invoice: GeneratedInvoice) -> Extraction:
    """The generator's truth with every span found again by :func:`locate` in its text
    (header values at their first print, rows and tax lines in order)."""
    t, text = invoice.truth, invoice.ocr_text

    def moved(node: _Node | None) -> _Node | None:
        if node is None:
            return None
        return node.model_copy(
            update={"evidence": _evidence(text, locate(text, node.evidence.quote))}
        )

    cursor = (1, 0)
    items = []
    for item in t.line_items:
        span = locate(text, item.evidence.quote, cursor)
        cursor = (span[0], span[2])
        items.append(item.model_copy(update={"evidence": _evidence(text, span)}))
    taxes = []
    for tax in t.tax_lines:
        span = locate(text, tax.evidence.quote, cursor)
        cursor = (span[0], span[2])
        taxes.append(tax.model_copy(update={"evidence": _evidence(text, span)}))
    return t.model_copy(
        update={
            "supplier": Supplier(name=moved(t.supplier.name), vat_id=moved(t.supplier.vat_id)),
            "invoice_number": moved(t.invoice_number),
            "issue_date": moved(t.issue_date),
            "due_date": moved(t.due_date),
            "currency": moved(t.currency),
            "net_total": moved(t.net_total),
            "tax_total": moved(t.tax_total),
            "gross_total": moved(t.gross_total),
            "iban": moved(t.iban),
            "line_items": tuple(items),
            "tax_lines": tuple(taxes),
        }
    )
