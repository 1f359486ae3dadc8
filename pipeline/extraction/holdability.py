"""What an e-invoice's XML states and the extraction contract has no place for.

One list of rules, read twice: the worker's e-invoice fast path turns each
:class:`Obstacle` into an ``einvoice_not_holdable`` reason (never a wrong accept), and
the corpus benchmark (``benchmarks/corpus/holdable.py``) counts a document with any
obstacle as one no faithful transcription can get SUCCEEDED.

The two paths hold different contracts. A model's answer is contract v2: document-level
allowances and charges, and any credit note, are an obstacle. The XML path is contract
v3 (``v3=True``): it holds them (:class:`~pipeline.invoice.AllowanceCharge`), and only
an entry it cannot hold (no indicator, amount or VAT rate) or entries that do not sum to
the totals the XML states is one. It identifies a seller without VAT id by its tax
number (BT-32); a seller with neither stays an obstacle, except on an invoice not subject
to VAT (category ``O``, EN 16931 BR-O-*), which states no seller VAT id by rule
(BR-O-02) and whose lines, allowances, charges and breakdown carry no rate (BR-O-05 to
BR-O-07): validation then proves the seller by its IBAN on file. Category ``O`` beside
another category, or with a rate other than 0, stays the obstacle ``vat_category_o``.
It holds a commercial credit note (381, or a UBL ``CreditNote`` without a type code)
that refers to at most one preceding invoice; every other credit note code (a
self-billed 261, a factored 396...), a corrected invoice (384) and negative totals on
any document type stay obstacles:
EN 16931 states a credit note's amounts positive, so a negative total is a debit in
disguise, or a credit the ERP would post as an invoice. What validation checks on
the values themselves (arithmetic, dates, IBAN, master data) is validation's, not here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from pipeline.extraction.einvoice_facts import (
    CORRECTIVE_INVOICE,
    CREDIT_NOTE,
    CREDIT_NOTE_TYPES,
    AllowanceFacts,
    InvoiceFacts,
    ItemFacts,
)

_CENT = Decimal("0.01")
#: UNTDID 1001 codes that are no invoice to pay: 751 is "invoice information for accounting".
NOT_INVOICE_TYPES = frozenset({"751"})
#: Self-billed invoices: the buyer wrote the page, so the supplier's identity is no proof.
SELF_BILLED_TYPES = frozenset({"389", "527"})


@dataclass(frozen=True)
class Obstacle:
    """One thing the XML states that contract v2 cannot hold.

    ``code`` names the kind (``credit_note``, ``allowances_charges``...), ``field`` the
    extraction field it concerns (``document``, ``line_items[2]``...), ``detail`` says
    what the XML holds.
    """

    code: str
    field: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


def obstacles(facts: InvoiceFacts, *, v3: bool = False) -> list[Obstacle]:
    """Every obstacle of ``facts``, document first, then line by line; empty: none.

    ``v3``: what contract v3 holds (the XML path) is no obstacle; otherwise contract v2's
    (a model's answer)."""
    allowances = _allowances_v3(facts) if v3 else _allowances_v2(facts)
    category_o = _category_o(facts) if v3 else []
    return [*_document(facts, v3=v3), *category_o, *allowances, *_items(facts, v3=v3)]


def _category_o(facts: InvoiceFacts) -> list[Obstacle]:
    """What contract v3 does not hold of category ``O`` (not subject to VAT): ``O`` beside
    another category or breakdown (EN 16931 BR-O-11 to BR-O-14), or a rate other than 0
    where ``O`` has none (BR-O-05 to BR-O-07)."""
    if not facts.states_category_o:
        return []
    if not facts.not_subject_to_vat:
        categories = ", ".join(sorted(c or "none" for c in facts.tax_categories))
        return [
            Obstacle(
                "vat_category_o",
                "tax_lines",
                f"category O beside other VAT categories or breakdowns ({categories})",
            )
        ]
    rates = [
        *(t.rate for t in facts.tax_lines),
        *(i.tax_rate for i in facts.items),
        *(e.tax_rate for e in facts.allowances_charges),
    ]
    stated = sorted({str(r) for r in rates if r is not None and r != 0})
    if stated:
        return [
            Obstacle(
                "vat_category_o",
                "tax_lines",
                f"not subject to VAT (category O) with rate {', '.join(stated)}",
            )
        ]
    return []


def _allowances_v2(facts: InvoiceFacts) -> list[Obstacle]:
    charges = [v for v in (facts.charge_total, facts.allowance_total) if v]
    if facts.document_allowances_charges or charges:
        return [
            Obstacle(
                "allowances_charges",
                "net_total",
                f"{facts.document_allowances_charges} document-level allowance/charge entries, "
                f"totals {', '.join(map(str, charges)) or 'none'}",
            )
        ]
    return []


def _allowances_v3(facts: InvoiceFacts) -> list[Obstacle]:
    """Entries contract v3 cannot hold, and stated totals the entries do not make."""
    out: list[Obstacle] = []
    for k, entry in enumerate(facts.allowances_charges):
        missing = [
            name
            for name, value in (
                ("charge indicator", entry.charge),
                ("amount", entry.amount),
                # category O states no rate (BR-O-06, BR-O-07)
                ("VAT rate", entry.tax_rate if not facts.not_subject_to_vat else 0),
            )
            if value is None
        ]
        if missing:
            out.append(
                Obstacle(
                    "allowances_charges",
                    f"allowances_charges[{k}]",
                    f"entry {k + 1} states no {', '.join(missing)}",
                )
            )
    for charge, stated, what in (
        (False, facts.allowance_total, "allowance"),
        (True, facts.charge_total, "charge"),
    ):
        summed = _sum(e for e in facts.allowances_charges if e.charge is charge)
        if stated is not None and stated != summed:
            out.append(
                Obstacle(
                    "allowances_charges",
                    "net_total",
                    f"the {what} entries sum to {summed}, the {what} total states {stated}",
                )
            )
    return out


def _sum(entries: Iterable[AllowanceFacts]) -> Decimal:
    return sum((e.amount for e in entries if e.amount is not None), Decimal(0))


def _document(facts: InvoiceFacts, *, v3: bool) -> list[Obstacle]:
    out: list[Obstacle] = []
    code = facts.type_code or ""
    if code == CREDIT_NOTE and v3:
        out += _preceding(facts)
    elif code in CREDIT_NOTE_TYPES:
        out.append(Obstacle("credit_note", "document", f"document type {code}"))
    elif code == CORRECTIVE_INVOICE:
        out.append(
            Obstacle(
                "document_type",
                "document_type",
                f"type code {code}: a corrected invoice (what it replaces is not modelled)",
            )
        )
    elif code in NOT_INVOICE_TYPES:
        out.append(
            Obstacle("not_an_invoice", "document", f"document type {code} (accounting information)")
        )
    elif code in SELF_BILLED_TYPES:
        out.append(
            Obstacle("self_billed", "document", f"document type {code}: the buyer wrote the page")
        )
    elif code not in ("", "380"):
        out.append(Obstacle("document_type", "document", f"type code {code}"))
    totals = (facts.net_total, facts.tax_total, facts.gross_total)
    if any(v is not None and v < 0 for v in totals):
        what = "a debit" if code in CREDIT_NOTE_TYPES else "a correction or credit"
        out.append(
            Obstacle(
                "negative_amounts",
                "gross_total",
                f"negative totals on document type {code or 'invoice'} ({what})",
            )
        )
    if facts.seller_vat_id is None and not (
        v3 and (facts.seller_tax_number or facts.not_subject_to_vat)
    ):
        # contract v3 identifies a seller without VAT id by its tax number (BT-32), and
        # one not subject to VAT (category O, BR-O-02: no VAT id) by its IBAN on file
        tax_no = f" (tax number {facts.seller_tax_number})" if facts.seller_tax_number else ""
        what = "no VAT id" + ("" if v3 else tax_no) + (" or tax number" if v3 else "")
        out.append(Obstacle("no_vat_id", "supplier.vat_id", f"supplier has {what}"))
    if (
        (facts.tax_currency not in (None, facts.currency))
        or len(set(facts.tax_total_currencies) - {""}) > 1
    ) and not (v3 and _tax_currency_holds(facts)):
        out.append(Obstacle("two_currencies", "currency", f"tax currency {facts.tax_currency}"))
    if not facts.items:
        out.append(
            Obstacle(
                "no_line_items", "line_items", f"profile {facts.profile} carries no line items"
            )
        )
    due, gross = facts.due_payable, facts.gross_total
    beyond_gross = bool(facts.prepaid or facts.rounding) or (
        None not in (due, gross) and due != gross
    )
    if gross is not None and beyond_gross and not (v3 and _payable_holds(facts)):
        # Prepaid amounts or a rounding amount: contract v2 has the gross total only, and a
        # payment of it would pay what was paid already. Contract v3 holds them where
        # they make the amount due (EN 16931 BR-CO-16) and none is negative; a prepaid or
        # rounding amount that does not make the amount due is reviewed on either.
        prepaid = f", prepaid {facts.prepaid}" if facts.prepaid else ""
        rounding = f", rounding {facts.rounding}" if facts.rounding else ""
        out.append(
            Obstacle(
                "amount_due",
                "gross_total",
                f"amount due {facts.due_payable} is not the gross total {facts.gross_total}"
                f"{prepaid}{rounding}",
            )
        )
    return out


def _tax_currency_holds(facts: InvoiceFacts) -> bool:
    """Whether contract v3 holds the second currency: the XML names a tax currency (BT-6)
    other than the invoice's and states the tax total once in each (BT-110, BT-111), and
    no amount of the tax totals in any third currency."""
    currency, tax_currency = facts.currency, facts.tax_currency
    if currency is None or tax_currency in (None, currency):
        return False
    stated = [c for c in facts.tax_total_currencies if c]
    return (
        sorted(stated) == sorted([currency, tax_currency])
        and facts.tax_total is not None
        and facts.tax_total_in_tax_currency is not None
    )


def _payable_holds(facts: InvoiceFacts) -> bool:
    """Whether contract v3 holds the amount due: gross - prepaid + rounding = due (BR-CO-16),
    nothing negative (a negative prepayment would pay more than the invoice, a negative
    amount due is a credit without a credit note's type), a rounding under one unit."""
    gross, due = facts.gross_total, facts.due_payable
    prepaid, rounding = facts.prepaid or Decimal(0), facts.rounding or Decimal(0)
    if gross is None or due is None or min(prepaid, due) < 0 or abs(rounding) >= 1:
        return False
    return gross - prepaid + rounding == due


def _preceding(facts: InvoiceFacts) -> list[Obstacle]:
    """A credit note's preceding invoice: one at most, each with its number (EN 16931 BR-55)."""
    refs = facts.preceding_invoices
    if len(refs) > 1:
        numbers = ", ".join(repr(r.number) for r in refs)
        return [
            Obstacle(
                "preceding_invoices",
                "preceding_invoice",
                f"the credit note refers to {len(refs)} invoices ({numbers}); one is linked",
            )
        ]
    if refs and refs[0].number is None:
        return [
            Obstacle("preceding_invoices", "preceding_invoice", "a reference without its number")
        ]
    return []


def _line_adjustment(item: ItemFacts) -> Decimal:
    """The line's charges less its allowances (entries without an amount count 0: an
    obstacle names them)."""
    return sum(
        (
            e.amount if e.charge else -e.amount
            for e in item.allowances_charges
            if e.amount is not None and e.charge is not None
        ),
        Decimal(0),
    )


def _items(facts: InvoiceFacts, *, v3: bool) -> list[Obstacle]:
    """Each line's obstacles. Contract v3 holds a line's allowances and charges (BG-27,
    BG-28) that state their indicator and amount; contract v2 none."""
    out: list[Obstacle] = []
    for i, item in enumerate(facts.items):
        field = f"line_items[{i}]"
        where = f"item {i + 1} ({item.name[:30]!r})"
        if item.line_status is not None:
            out.append(Obstacle("sub_lines", field, f"{where} has line status {item.line_status}"))
        # contract v3 holds a line not subject to VAT without a rate (BR-O-05)
        rated = item.tax_rate is not None or (v3 and facts.not_subject_to_vat)
        if None in (item.quantity, item.unit_price, item.line_amount) or not rated:
            out.append(
                Obstacle("item_incomplete", field, f"{where} lacks quantity, price, amount or rate")
            )
            continue
        basis = item.basis_quantity or Decimal(1)
        if basis != 1 and (not v3 or basis <= 0):
            # contract v3 holds a price per basis quantity (BT-149) greater than 0
            out.append(Obstacle("price_basis", field, f"{where} priced per {item.basis_quantity}"))
        incomplete = [
            k + 1
            for k, e in enumerate(item.allowances_charges)
            if e.charge is None or e.amount is None
        ]
        if item.allowances_charges and (not v3 or incomplete):
            what = f": entry {', '.join(map(str, incomplete))} states no indicator or amount"
            out.append(Obstacle("item_allowances_charges", field, where + (what if v3 else "")))
        assert item.quantity is not None and item.unit_price is not None
        per_unit = item.unit_price / basis if basis > 0 else item.unit_price
        net = item.quantity * per_unit + _line_adjustment(item)
        product = net.quantize(_CENT, rounding=ROUND_HALF_UP)
        if item.unit_price != item.unit_price.quantize(_CENT) and product != item.line_amount:
            out.append(
                Obstacle(
                    "price_decimals",
                    field,
                    f"{where}: {item.quantity} x {item.unit_price} rounds to {product}, "
                    f"the line states {item.line_amount}",
                )
            )
    return out
