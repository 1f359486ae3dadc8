"""Planted disagreements between a corpus PDF's page and its embedded XML (issue 44).

``python -m benchmarks.corpus.xml_plant MIRROR`` takes every corpus PDF that the
e-invoice path decides SUCCEEDED when read untouched and that has a page
(:mod:`benchmarks.corpus.embedded`), and plants one disagreement at a time, as a forger
would: another gross total on the page (``page_gross_total``), another IBAN in the XML
where the page prints the XML's (``xml_iban``; a valid one, so no checksum betrays it,
and on file for the tenant, so only the page can), the XML's payee account removed where
the page prints its IBAN (``xml_iban_removed``: a null IBAN beside a printed one) and the
page's IBAN removed where the XML states one (``page_iban_removed``), and another invoice
number and issue date on the page (``page_invoice_number``, ``page_issue_date``). A plant
counts only where it took: the planted page no longer prints the XML's value in any form the
cross-check reads; otherwise the document is "not plantable" for it.

Each planted document must go to review with ``xml_text_mismatch``; it prints, per
plant, how many did, how many went to review for other reasons only, and how many were
accepted (a false accept of a forged invoice). The corpus has fewer SUCCEEDED documents
than the 20 issue 44 asks to plant on, so the same plants go, in a second table, on the
documents reviewed untouched for other reasons whose page agrees with their XML: there
nothing is accepted either way, and what counts is whether the cross-check adds its own
``xml_text_mismatch``.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from benchmarks.corpus.embedded import EmbeddedInvoice, decide, embedded_invoices
from benchmarks.corpus.holdable import amount_styles
from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import InvoiceFacts
from pipeline.invoice import ReasonCode, compact_id, date_readings, number_readings
from pipeline.validation import Decision

#: Date formats a planted issue date is rewritten in (the page's own, where it is one).
_DATE_FORMATS = ("%d.%m.%Y", "%Y-%m-%d", "%d/%m/%Y", "%d.%m.%y", "%Y%m%d", "%d-%m-%Y")
#: A printed date: not part of an identifier ("RE-20190610/507" names an invoice).
_DATE_SHAPE = re.compile(
    r"(?<![0-9A-Za-z/-])[0-9]{1,4}[./-]?[0-9]{1,2}[./-]?[0-9]{2,4}(?![0-9/]|-[0-9A-Za-z])"
)
_IBANID = re.compile(rb"(<(?:[A-Za-z0-9]+:)?IBANID>)([^<]*)(<)")
_PAYEE_ACCOUNT = re.compile(
    rb"<((?:[A-Za-z0-9]+:)?(?:PayeePartyCreditorFinancialAccount|PayeeFinancialAccount))>"
    rb".*?</\1>",
    re.DOTALL,
)


@dataclass(frozen=True)
class Planted:
    """A document with one disagreement planted: the XML and page to decide."""

    xml: bytes
    page: str


Plant = Callable[[EmbeddedInvoice, InvoiceFacts], Planted | None]


def _replace_amount(text: str, old: Decimal, new: Decimal) -> str:
    olds, news = amount_styles(old), amount_styles(new)
    for style in sorted(olds, key=lambda k: len(olds[k]), reverse=True):
        pattern = rf"(?<![0-9.,]){re.escape(olds[style])}(?![0-9]|[.,][0-9])"
        text = re.sub(pattern, news.get(style, news[".plain"]), text)
    return text


def plant_page_gross_total(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The page prints a gross total 100.00 higher wherever it printed the XML's."""
    if facts.gross_total is None:
        return None
    page = _replace_amount(doc.page, facts.gross_total, facts.gross_total + 100)
    if abs(facts.gross_total) in number_readings(page):
        return None
    return Planted(doc.xml, page)


def _other_iban(iban: str) -> str:
    """A valid IBAN of the same country and length, its last account digit changed."""
    bban = iban[4:]
    last = bban[-1]
    bban = bban[:-1] + (str((int(last) + 1) % 10) if last.isdigit() else "0")
    digits = "".join(str(int(ch, 36)) for ch in bban + iban[:2] + "00")
    return f"{iban[:2]}{98 - int(digits) % 97:02d}{bban}"


def plant_xml_iban(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The XML names another account (every IBANID), where the page prints the XML's."""
    if facts.iban is None or compact_id(facts.iban) not in compact_id(doc.page):
        return None
    other = _other_iban(facts.iban).encode()
    xml = _IBANID.sub(lambda m: m.group(1) + other + m.group(3), doc.xml)
    return Planted(xml, doc.page) if xml != doc.xml else None


def plant_xml_iban_removed(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The XML states no payee account (every ``PayeePartyCreditorFinancialAccount``,
    UBL ``PayeeFinancialAccount``, removed), where the page prints the XML's IBAN: the
    result's IBAN is then null beside a printed one, which must never be accepted."""
    if facts.iban is None or compact_id(facts.iban) not in compact_id(doc.page):
        return None
    xml = _PAYEE_ACCOUNT.sub(b"", doc.xml)
    return Planted(xml, doc.page) if xml != doc.xml else None


def plant_page_iban_removed(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The page prints no IBAN (each spelling of the XML's blanked, spaces or not), where
    the XML states one: the XML's IBAN is then printed nowhere."""
    if facts.iban is None:
        return None
    printed = re.compile(r"\s?".join(re.escape(ch) for ch in facts.iban), re.IGNORECASE)
    page = printed.sub(lambda m: " " * len(m.group()), doc.page)
    if page == doc.page or compact_id(facts.iban) in compact_id(page):
        return None
    return Planted(doc.xml, page)


def plant_page_invoice_number(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The page prints another invoice number (its last character changed) wherever it
    printed the XML's."""
    number = facts.invoice_number
    if not number:
        return None
    last = number[-1]
    other = number[:-1] + (str((int(last) + 1) % 10) if last.isdigit() else "X")
    page = doc.page.replace(number, other)
    if compact_id(number) in compact_id(page):
        return None
    return Planted(doc.xml, page)


def _as_date(printed: str, fmt: str) -> date | None:
    try:
        return datetime.strptime(printed, fmt).date()
    except ValueError:
        return None


def plant_page_issue_date(doc: EmbeddedInvoice, facts: InvoiceFacts) -> Planted | None:
    """The page prints the issue date three days later, in its own format, wherever it
    printed the XML's (dates written with month names are not rewritten: no plant)."""
    issued = facts.issue_date
    if issued is None:
        return None
    later = issued + timedelta(days=3)

    def rewrite(m: re.Match[str]) -> str:
        for fmt in _DATE_FORMATS:
            if _as_date(m.group(), fmt) == issued:
                return later.strftime(fmt)
        return m.group()

    page = _DATE_SHAPE.sub(rewrite, doc.page)
    if issued in date_readings(page):
        return None
    return Planted(doc.xml, page)


PLANTS: dict[str, Plant] = {
    "page_gross_total": plant_page_gross_total,
    "xml_iban": plant_xml_iban,
    "xml_iban_removed": plant_xml_iban_removed,
    "page_iban_removed": plant_page_iban_removed,
    "page_invoice_number": plant_page_invoice_number,
    "page_issue_date": plant_page_issue_date,
}


def _outcome(planted: Planted) -> str:
    report = decide(planted.xml, planted.page).report
    if any(r.code is ReasonCode.XML_TEXT_MISMATCH for r in report.reasons):
        return "xml_text_mismatch"
    if report.decision is Decision.REVIEW_REQUIRED:
        return "review_other"
    return "accepted"


#: The two groups planted on: the brief's (SUCCEEDED untouched), and documents reviewed
#: untouched for other reasons whose page agrees with their XML, where the cross-check
#: must still add its own reason.
_GROUPS = ("SUCCEEDED untouched", "reviewed untouched, page agreeing")


def _print(group: str, counts: dict[str, Counter[str]], eligible: int, planted: int) -> None:
    print(f"{group}, with a page: {eligible} documents, planted on {planted}")
    print(f"  {'plant':<22}{'planted':>8}{'xml_text_mismatch':>19}{'review_other':>13}"
          f"{'accepted':>9}{'not_plantable':>14}")  # fmt: skip
    total = Counter[str]()
    for name, c in [*counts.items(), ("all plants", total)]:
        n = c["xml_text_mismatch"] + c["review_other"] + c["accepted"]
        if name != "all plants":
            total.update(c)
        print(f"  {name:<22}{n:>8}{c['xml_text_mismatch']:>19}{c['review_other']:>13}"
              f"{c['accepted']:>9}{c['not_plantable']:>14}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the ZUGFeRD corpus: a bare git mirror or folder")
    args = parser.parse_args(argv)
    tree = CorpusTree(args.corpus)
    counts = {g: {name: Counter[str]() for name in PLANTS} for g in _GROUPS}
    planted_on: dict[str, set[str]] = {g: set() for g in _GROUPS}
    eligible: Counter[str] = Counter()
    missed: list[str] = []
    for doc in embedded_invoices(tree):
        if isinstance(doc, str) or not doc.page.strip() or (facts := doc.facts) is None:
            continue
        report = decide(doc.xml, doc.page).report
        if report.decision is Decision.SUCCEEDED:
            group = _GROUPS[0]
        elif all(r.code is not ReasonCode.XML_TEXT_MISMATCH for r in report.reasons):
            group = _GROUPS[1]
        else:
            continue
        eligible[group] += 1
        for name, plant in PLANTS.items():
            planted = plant(doc, facts)
            if planted is None:
                counts[group][name]["not_plantable"] += 1
                continue
            planted_on[group].add(doc.path)
            outcome = _outcome(planted)
            counts[group][name][outcome] += 1
            if outcome != "xml_text_mismatch":
                missed.append(f"{name}: {doc.path} ({outcome})")
    print(f"corpus commit {tree.commit()}")
    for group in _GROUPS:
        _print(group, counts[group], eligible[group], len(planted_on[group]))
    for line in missed:
        print(f"  not caught by the cross-check: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
