"""E-invoices as ``fenceline eval --dataset`` lines, one family per source and profile.

A record's truth is its XML's (:mod:`benchmarks.corpus.cii`), contract v3's values
included (:func:`v3_truth`), its ``ocr_text`` the PDF's
text layer, its ``expected_decision`` ``SUCCEEDED`` only where contract v2 can hold the
invoice (:mod:`benchmarks.corpus.holdable`); ``notes`` names every obstacle otherwise.

The corpus repeats one example across ZUGFeRD 1.0, 2.0, 2.1 and Factur-X, and within
one version under several file names. Two documents are *the same invoice* when their
truth is identical (every value the evaluation scores, plus the document type). Within
one family (source and profile) the first by path is kept and the rest are dropped;
across families every copy is kept (each is another rendering of the page) and flagged
with ``repeat_of``, so a report can count distinct invoices.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks.corpus.cii import InvoiceFacts, ItemFacts, NotCrossIndustryInvoice, read_cii
from benchmarks.corpus.holdable import Obstacle, obstacles
from benchmarks.corpus.pdf import embedded_xml, text_layer
from pipeline.invoice import COLLECTED_PAYMENT_MEANS, DIRECT_DEBIT_PAYMENT_MEANS


class NoTruth(ValueError):
    """The document gives no truth: no embedded invoice XML, not CII, or a required value
    (number, issue date, totals, an item's amount) missing from it."""


class NoEmbeddedXml(NoTruth):
    """The PDF carries no invoice XML."""


def _plain(value: Decimal) -> str:
    """A quantity or rate without trailing zeros: ``20.0000`` -> ``20``, ``19.00`` -> ``19``."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _money(value: Decimal) -> str:
    return format(value, "f")


def _opt(value: Decimal | None, fmt: Any = _plain) -> str | None:
    return None if value is None else str(fmt(value))


def _payable(facts: InvoiceFacts) -> dict[str, str]:
    """BT-113 to BT-115 as the truth states them: nothing where the gross total is due as
    it is (no prepaid, no rounding amount other than 0), else the amount due and each of
    the prepaid and rounding amounts the XML states other than 0. A due equal to the gross
    total beside a prepaid amount (BR-CO-16 broken) is stated as written."""
    due, prepaid, rounding = facts.due_payable, facts.prepaid, facts.rounding
    if due is None or (due == facts.gross_total and not prepaid and not rounding):
        return {}
    out = {"amount_due": _money(due)}
    if prepaid:
        out["prepaid_amount"] = _money(prepaid)
    if rounding:
        out["rounding_amount"] = _money(rounding)
    return out


def _line_v3(item: ItemFacts) -> dict[str, Any]:
    """A line's contract v3 keys: its own allowances and charges (those inside the price
    are the price's, already in the net unit price) and a price basis other than 1."""
    out: dict[str, Any] = {}
    entries = [
        {"kind": "charge" if e.charge else "allowance", "amount": _money(e.amount)}
        for e in item.allowances_charges
        if e.charge is not None and e.amount is not None
    ]
    if entries:
        out["allowances_charges"] = entries
    if item.basis_quantity is not None and item.basis_quantity != 1:
        out["price_basis_quantity"] = _plain(item.basis_quantity)
    return out


def v3_truth(facts: InvoiceFacts) -> dict[str, Any]:
    """The contract v3 keys of a dataset line's truth (docs/eval-dataset.md), each only
    where the XML states it, so that a reading without it (a model's, contract v2) misses
    it and cannot be a right SUCCEEDED.

    ``document_type`` and ``preceding_invoice`` (the first reference with a number);
    document-level ``allowances_charges`` (logistics charges included); the payable
    amounts where the amount due is not the gross total; ``tax_currency`` and
    ``tax_total_in_tax_currency`` where VAT is accounted in another currency;
    ``payment_means`` where every means the XML states is one by which the supplier
    collects (card, direct debit: the first of them), with a direct debit's mandate
    reference and debited account where stated. An allowance or charge without
    indicator, amount or rate has no form in the truth and is left out; the invoice is
    not holdable anyway (it has allowances or charges, an obstacle under contract v2).
    The seller's tax number goes into ``supplier`` (:func:`truth_of`), a line's own
    entries and price basis into its row.
    """
    out: dict[str, Any] = {}
    if facts.document_type != "invoice":
        out["document_type"] = facts.document_type
    preceding = [p for p in facts.preceding_invoices if p.number is not None]
    if preceding:
        first = preceding[0]
        out["preceding_invoice"] = {
            "number": first.number,
            "issue_date": first.issue_date.isoformat() if first.issue_date else None,
        }
    entries = [
        {
            "kind": "charge" if e.charge else "allowance",
            "amount": _money(e.amount),
            "tax_rate": _plain(e.tax_rate),
        }
        for e in facts.allowances_charges
        if e.charge is not None and e.amount is not None and e.tax_rate is not None
    ]
    if entries:
        out["allowances_charges"] = entries
    out.update(_payable(facts))
    second = facts.tax_currency
    if second not in (None, facts.currency) and facts.tax_total_in_tax_currency is not None:
        out["tax_currency"] = second
        out["tax_total_in_tax_currency"] = _money(facts.tax_total_in_tax_currency)
    codes = facts.payment_means
    if codes and set(codes) <= COLLECTED_PAYMENT_MEANS:
        out["payment_means"] = codes[0]
        if codes[0] in DIRECT_DEBIT_PAYMENT_MEANS:
            debit = {"mandate_reference": facts.mandate_reference,
                     "debited_account": facts.debited_account}  # fmt: skip
            out.update({k: v for k, v in debit.items() if v is not None})
    return out


def truth_of(facts: InvoiceFacts) -> dict[str, Any]:
    """The ``truth`` object of a dataset line (docs/eval-dataset.md), contract v3's keys
    where the XML states them (:func:`v3_truth`).

    Raises:
        NoTruth: a value the format requires is absent (invoice number, issue date,
            a total, an item's amount or tax rate).
    """
    needed = {
        "invoice_number": facts.invoice_number,
        "issue_date": facts.issue_date,
        "supplier.name": facts.seller_name,
        "net_total": facts.net_total,
        "tax_total": facts.tax_total,
        "gross_total": facts.gross_total,
    }
    if absent := [k for k, v in needed.items() if v is None]:
        raise NoTruth(f"the XML has no {', '.join(absent)}")
    if any(i.line_amount is None or i.tax_rate is None for i in facts.items):
        raise NoTruth("an item has no amount or no tax rate")
    assert facts.issue_date and facts.net_total is not None and facts.tax_total is not None
    assert facts.gross_total is not None
    supplier: dict[str, Any] = {"name": facts.seller_name, "vat_id": facts.seller_vat_id}
    if facts.seller_tax_number:
        supplier["tax_number"] = facts.seller_tax_number
    return {
        "supplier": supplier,
        "invoice_number": facts.invoice_number,
        "issue_date": facts.issue_date.isoformat(),
        "due_date": due.isoformat() if (due := facts.payable_date) else None,
        "currency": facts.currency,
        "iban": facts.iban,
        "net_total": _money(facts.net_total),
        "tax_total": _money(facts.tax_total),
        "gross_total": _money(facts.gross_total),
        "line_items": [
            {
                "description": i.name,
                "quantity": _opt(i.quantity),
                "unit_price": _opt(i.unit_price),
                "line_amount": _opt(i.line_amount, _money),
                "tax_rate": _opt(i.tax_rate),
            }
            | _line_v3(i)
            for i in facts.items
        ],
        "tax_lines": [
            {"rate": _opt(t.rate), "base": _opt(t.base, _money), "amount": _opt(t.amount, _money)}
            for t in facts.tax_lines
            if t.rate is not None and t.base is not None and t.amount is not None
        ],
    } | v3_truth(facts)


def source_of(path: str) -> str:
    """A short source name from a path in the corpus: ``v2-symtrax``, ``xml-rechnung``..."""
    parts = path.split("/")
    if parts[0] == "XML-Rechnung":
        return "xml-rechnung"
    version = {"ZUGFeRDv1": "v1", "ZUGFeRDv2": "v2"}.get(parts[0], parts[0].lower())
    vendor = parts[2] if len(parts) > 3 and parts[1] == "correct" else parts[1]
    slug = re.sub(r"[^a-z0-9]+", "-", vendor.lower()).strip("-")
    return f"{version}-{slug}"


@dataclass
class CorpusRecord:
    """One document on its way to a dataset line."""

    path: str
    facts: InvoiceFacts
    text: str
    obstacles: list[Obstacle]
    xml_name: str
    repeat_of: str | None = None
    truth: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.truth = truth_of(self.facts)

    @property
    def holdable(self) -> bool:
        return not self.obstacles

    @property
    def obstacle_codes(self) -> list[str]:
        return sorted({o.code for o in self.obstacles})

    @property
    def family(self) -> str:
        held = "holdable" if self.holdable else "not-holdable"
        return f"zugferd:{source_of(self.path)}:{self.facts.profile}:{held}"

    @property
    def group(self) -> tuple[str, str]:
        """The family a repeat is dropped within: source and profile."""
        return source_of(self.path), self.facts.profile

    @property
    def key(self) -> str:
        """Identical keys: the same invoice (every scored value and the document type)."""
        return json.dumps([self.facts.type_code, self.truth], sort_keys=True)

    def line(self) -> dict[str, Any]:
        """The dataset line; keys beyond docs/eval-dataset.md's are the corpus's bookkeeping."""
        out: dict[str, Any] = {
            "id": self.path,
            "ocr_text": self.text,
            "truth": self.truth,
            "expected_decision": "SUCCEEDED" if self.holdable else "REVIEW_REQUIRED",
            "today": self.truth["issue_date"],
            "family": self.family,
        }
        if self.obstacles:
            out["notes"] = "; ".join(str(o) for o in self.obstacles)
        out["obstacles"] = self.obstacle_codes
        out["profile"] = self.facts.profile
        out["document_type"] = self.facts.type_code
        out["xml"] = self.xml_name
        if self.repeat_of is not None:
            out["repeat_of"] = self.repeat_of
        return out


def record_from_pdf(pdf: Path, doc_id: str) -> CorpusRecord:
    """One PDF as a record: truth from its XML, text from its text layer.

    ``doc_id`` is the document's path in the corpus: the record's id, and where its
    family's source is read from (:func:`source_of`).

    Raises:
        NoTruth: no invoice XML (:class:`NoEmbeddedXml`), not CII, or a value missing.
    """
    xml = embedded_xml(pdf)
    if xml is None:
        raise NoEmbeddedXml("no embedded invoice XML")
    try:
        facts = read_cii(xml.data)
    except NotCrossIndustryInvoice as exc:
        raise NoTruth(str(exc)) from exc
    text = text_layer(pdf)
    return CorpusRecord(doc_id, facts, text, obstacles(facts, text), xml.name)


@dataclass
class Deduplicated:
    """What :func:`deduplicate` kept, and how many repeats it dropped within a family."""

    kept: list[CorpusRecord]
    dropped: list[tuple[str, str]]  # (dropped path, kept path)
    distinct: int


def deduplicate(records: list[CorpusRecord]) -> Deduplicated:
    """Drop repeats within a family; flag repeats across families (``repeat_of``)."""
    first_anywhere: dict[str, str] = {}
    first_in_group: dict[tuple[tuple[str, str], str], str] = {}
    kept: list[CorpusRecord] = []
    dropped: list[tuple[str, str]] = []
    for record in sorted(records, key=lambda r: r.path):
        slot = (record.group, record.key)
        if slot in first_in_group:
            dropped.append((record.path, first_in_group[slot]))
            continue
        first_in_group[slot] = record.path
        if record.key in first_anywhere:
            record.repeat_of = first_anywhere[record.key]
        else:
            first_anywhere[record.key] = record.path
        kept.append(record)
    return Deduplicated(kept, dropped, len(first_anywhere))
