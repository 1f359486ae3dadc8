"""Whether extraction contract v2 can hold an invoice, and why not.

A real invoice is *holdable* when a faithful transcription of its page, written in
contract v2 and validated under the default policy, must be SUCCEEDED: every identity
validation checks holds on the XML's own values (``quantity x unit price = line amount``
to the cent, lines sum to the net total, ``base x rate = tax`` per rate, net + tax =
gross), every field the policy requires is there, and the page prints what the truth
says. Anything else goes to review, and the evaluation must see it there: such an
invoice gets ``expected_decision: REVIEW_REQUIRED`` and one :class:`Obstacle` per reason.

The obstacles name what real invoices print and contract v2 has no place for
(allowances and charges, credit notes, prices per basis quantity, a supplier with a tax
number and no VAT id); they are the pipeline's own list
(:mod:`pipeline.extraction.holdability`, which the e-invoice fast path reviews by), so
the benchmark and the product cannot drift apart. What this module adds is what
validation would refuse on the XML's values and what the page must print. The
e-invoice contract (v3) is meant to hold the obstacles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from benchmarks.corpus.cii import InvoiceFacts
from pipeline.extraction import obstacles as xml_obstacles
from pipeline.invoice import ReasonCode, compact_id, date_readings, iban_checksum_ok
from pipeline.validation.payee import check_iban_absent

_CENT = Decimal("0.01")
_MAX_RATE = Decimal("99.99")
_MAX_TERM_DAYS = 180  # ValidationPolicy.max_payment_term_days


@dataclass(frozen=True)
class Obstacle:
    """One reason a faithful transcription cannot be SUCCEEDED under contract v2."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


def _money(value: Decimal) -> Decimal:
    return value.quantize(_CENT, rounding=ROUND_HALF_UP)


def _beyond_cents(value: Decimal | None) -> bool:
    return value is not None and value != value.quantize(_CENT)


def amount_styles(value: Decimal) -> dict[str, str]:
    """``value`` in each style a page may print it, keyed by the style: 1234.5 as
    ``1.234,50`` (``".,"``), ``1234,50`` (``",plain"``), ``1,234.50`` (``",."``)...; a
    whole amount also without its cents (``"whole"``)."""
    text = format(abs(_money(value)), "f")
    whole, cents = text.split(".")
    groups = [whole[max(0, i - 3) : i] for i in range(len(whole), 0, -3)][::-1]
    out = {",plain": f"{whole},{cents}", ".plain": f"{whole}.{cents}"}
    for sep, point in ((".", ","), (",", "."), (" ", ","), ("\u00a0", ","), ("'", ".")):
        out[sep + point] = sep.join(groups) + point + cents
    if cents == "00":
        out["whole"] = whole
    return out


def amount_spellings(value: Decimal) -> set[str]:
    """How a page may print ``value``: 1234.5 as ``1.234,50``, ``1234,50``, ``1,234.50``..."""
    return set(amount_styles(value).values())


def printed_amount(value: Decimal, text: str) -> bool:
    """``value`` appears in ``text`` as a whole number (not inside a longer one)."""
    return any(
        re.search(rf"(?<![0-9.,]){re.escape(s)}(?![0-9]|[.,][0-9])", text)
        for s in amount_spellings(value)
    )


def _printed_text(value: str, text: str) -> bool:
    squeeze = re.compile(r"\s+")
    return squeeze.sub(" ", value).casefold() in squeeze.sub(" ", text).casefold()


def _printed_words(value: str, text: str) -> bool:
    """Every word of a description is on the page (a description may wrap onto the next
    line with other columns between its parts, so only the words are required)."""
    words = set(re.findall(r"\w+", text.casefold()))
    return all(word in words for word in re.findall(r"\w+", value.casefold()))


def _printed_id(value: str, text: str) -> bool:
    return compact_id(value) in compact_id(text)


def _xml_obstacles(facts: InvoiceFacts) -> list[Obstacle]:
    """The pipeline's one list of what contract v2 cannot hold, as a page transcription
    meets it.

    Two of the fast path's obstacles are no obstacle to a transcription, or are one by
    another name: a type code the fast path does not know (``document_type``) is not on
    the page a transcription reads, and contract v2 has no document type to get wrong;
    a price whose decimals do not round to the line amount (``price_decimals``) is what
    validation's arithmetic refuses on the transcription, counted as ``item_arithmetic``.
    """
    return [
        Obstacle(o.code, o.detail)
        for o in xml_obstacles(facts)
        if o.code not in ("document_type", "price_decimals")
    ]


def _payee(facts: InvoiceFacts, text: str) -> list[Obstacle]:
    """A transcription without IBAN, as validation's payee rule meets it
    (:mod:`pipeline.validation.payee`): holdable where the page states no account to
    pay (the ERP pays the supplier's account on file); ``no_iban`` where the page prints
    something IBAN-like, ``payee_account_not_iban`` where the XML or the page states an
    account that is no IBAN."""
    if facts.iban is not None:
        return []
    if facts.payee_accounts:
        return [Obstacle("payee_account_not_iban", ", ".join(facts.payee_accounts))]
    refused = check_iban_absent(text)
    if any(r.code is ReasonCode.PAYEE_ACCOUNT_NOT_IBAN for r in refused):
        return [Obstacle("payee_account_not_iban", refused[0].detail)]
    if refused:
        return [Obstacle("no_iban", f"no IBAN in the XML; {refused[0].detail}")]
    return []


def _document(facts: InvoiceFacts) -> list[Obstacle]:
    """What validation's policy refuses on the XML's own header values."""
    out: list[Obstacle] = []
    for name, value in (
        ("invoice_number", facts.invoice_number),
        ("issue_date", facts.issue_date),
        ("supplier.name", facts.seller_name),
    ):
        if value is None:
            out.append(Obstacle("missing_field", f"{name} absent from the XML"))
    if facts.currency is None:
        out.append(Obstacle("no_currency", "InvoiceCurrencyCode absent"))
    if facts.iban is not None and not iban_checksum_ok(facts.iban):
        out.append(Obstacle("iban_invalid", f"{facts.iban} fails mod-97"))
    due = facts.payable_date
    if facts.issue_date is not None and due is not None:
        term = (due - facts.issue_date).days
        if term < 0:
            out.append(Obstacle("due_before_issue", f"due {due}"))
        elif term > _MAX_TERM_DAYS:
            out.append(Obstacle("long_payment_term", f"{term} days"))
    return out


def _arithmetic(facts: InvoiceFacts) -> list[Obstacle]:
    """What validation's arithmetic refuses on the XML's own amounts."""
    out: list[Obstacle] = []
    for i, item in enumerate(facts.items):
        where = f"item {i + 1} ({item.name[:30]!r})"
        if item.quantity is None or item.unit_price is None or item.line_amount is None:
            continue  # item_incomplete, an obstacle
        if _money(item.quantity * item.unit_price) != item.line_amount:
            out.append(
                Obstacle(
                    "item_arithmetic",
                    f"{where}: {item.quantity} x {item.unit_price} != {item.line_amount}",
                )
            )
    amounts = [facts.net_total, facts.tax_total, facts.gross_total]
    amounts += [i.line_amount for i in facts.items]
    amounts += [v for t in facts.tax_lines for v in (t.base, t.amount)]
    if any(_beyond_cents(v) for v in amounts):
        out.append(Obstacle("sub_cent_amounts", "an amount has more than 2 decimals"))
    rates = [t.rate for t in facts.tax_lines] + [i.tax_rate for i in facts.items]
    if any(r is not None and (r > _MAX_RATE or r < 0 or r != r.quantize(_CENT)) for r in rates):
        out.append(Obstacle("rate_out_of_range", "a tax rate outside 0-99.99 %"))
    out += _sums(facts)
    return out


def _sums(facts: InvoiceFacts) -> list[Obstacle]:
    """The identities validation checks, on the XML's own values."""
    out: list[Obstacle] = []
    net, tax, gross = facts.net_total, facts.tax_total, facts.gross_total
    if net is None or tax is None or gross is None:
        return [Obstacle("missing_field", "a total is absent from the XML")]
    lines = [i for i in facts.items if i.line_amount is not None]
    if facts.items and sum((i.line_amount or Decimal(0) for i in lines), Decimal(0)) != net:
        out.append(Obstacle("lines_not_net", "line amounts do not sum to the net total"))
    seen: set[Decimal] = set()
    for t in facts.tax_lines:
        if t.rate is None or t.base is None or t.amount is None:
            out.append(Obstacle("tax_line_incomplete", "a tax line lacks rate, base or amount"))
            continue
        if t.rate in seen:
            out.append(Obstacle("tax_rate_repeated", f"two tax lines at {t.rate} %"))
        seen.add(t.rate)
        if _money(t.base * t.rate / 100) != t.amount:
            out.append(Obstacle("tax_arithmetic", f"{t.base} x {t.rate} % != {t.amount}"))
        at_rate = sum(
            (i.line_amount or Decimal(0) for i in lines if i.tax_rate == t.rate), Decimal(0)
        )
        if facts.items and at_rate != t.base:
            out.append(Obstacle("tax_base", f"lines at {t.rate} % sum to {at_rate}, base {t.base}"))
    if sum((t.amount or Decimal(0) for t in facts.tax_lines), Decimal(0)) != tax:
        out.append(Obstacle("tax_lines_not_total", "tax lines do not sum to the tax total"))
    if net + tax != gross:
        out.append(Obstacle("gross_arithmetic", f"{net} + {tax} != {gross}"))
    return out


def _printed(facts: InvoiceFacts, text: str) -> list[Obstacle]:
    """The page must print what the truth says, or no transcription can find it."""
    if not text.strip():
        return [Obstacle("no_text_layer", "the PDF prints no extractable text")]
    missing: list[str] = []
    if facts.invoice_number and not _printed_text(facts.invoice_number, text):
        missing.append("invoice_number")
    if facts.seller_name and not _printed_text(facts.seller_name, text):
        missing.append("supplier.name")
    if facts.seller_vat_id and not _printed_id(facts.seller_vat_id, text):
        missing.append("supplier.vat_id")
    if facts.iban and not _printed_id(facts.iban, text):
        missing.append("iban")
    if facts.issue_date and facts.issue_date not in date_readings(text):
        missing.append("issue_date")
    if facts.payable_date and facts.payable_date not in date_readings(text):
        missing.append("due_date")
    for i, item in enumerate(facts.items):
        if item.name and not _printed_words(item.name, text):
            missing.append(f"line_items[{i}].description")
    for name, value in (
        ("net_total", facts.net_total),
        ("tax_total", facts.tax_total),
        ("gross_total", facts.gross_total),
    ):
        if value is not None and not printed_amount(value, text):
            missing.append(name)
    return [Obstacle("not_printed", f"{name} not found on the page") for name in missing]


def obstacles(facts: InvoiceFacts, text: str) -> list[Obstacle]:
    """Every reason a faithful transcription cannot be SUCCEEDED; empty: holdable."""
    return [
        *_xml_obstacles(facts),
        *_document(facts),
        *_payee(facts, text),
        *_arithmetic(facts),
        *_printed(facts, text),
    ]
