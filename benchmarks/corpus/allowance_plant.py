"""A wrong document-level allowance or charge planted in SUCCEEDED e-invoices (issue 44).

``python -m benchmarks.corpus.allowance_plant SOURCE...`` reads every UBL or CII
e-invoice of each source (a bare git mirror or a folder: standalone ``.xml`` files,
decided as an XML upload, and the corpus PDFs' embedded XML, decided with their page),
keeps those that state a document-level allowance or charge (contract v3) and are
SUCCEEDED untouched (each accepted value checked against what the reader read from the
XML) or reviewed for other reasons only (no arithmetic reason, no allowance obstacle),
and plants one wrong amount at a time in the XML's first allowance or charge:

- ``entry``: its amount 1.00 higher, the stated allowance or charge total (BT-107,
  BT-108) left as it is;
- ``entry_and_total``: its amount and the stated total both 1.00 higher, so only the
  net and tax arithmetic (BT-106 - BT-107 + BT-108 = BT-109, each rate's base) can see it.

The plant is made on the bytes (no re-serialisation) and read back: a plant counts only
where the reader then reads the changed amount. A SUCCEEDED invoice planted must go to
review; a reviewed one must gain a reason of the arithmetic or of the reader's
allowance totals. The new reasons are counted.
"""

from __future__ import annotations

import argparse
import collections
import re
from decimal import Decimal
from pathlib import Path

from benchmarks.corpus.embedded import corpus_einvoices, decide
from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import InvoiceFacts, read_invoice_xml
from pipeline.invoice import ReasonCode
from pipeline.validation import Decision, ValidationReport

#: The element after which a CII document's header allowances start (its header
#: settlement: D16B, then ZUGFeRD 1.0); UBL's stand before its first line.
_CII_HEADER = (b"ApplicableHeaderTradeSettlement", b"ApplicableSupplyChainTradeSettlement")
_UBL_LINES = (b"InvoiceLine", b"CreditNoteLine")


def _value_at(xml: bytes, name: bytes, start: int) -> re.Match[bytes] | None:
    """The first ``<prefix:name ...>value</`` at or after ``start``."""
    pattern = rb"<(?:\w+:)?" + name + rb"\b[^>]*>([^<]+)</"
    return re.compile(pattern).search(xml, start)


def _bump(xml: bytes, found: re.Match[bytes], delta: Decimal) -> bytes:
    value = Decimal(found.group(1).decode().strip()) + delta
    return xml[: found.start(1)] + str(value).encode() + xml[found.end(1) :]


def plant(xml: bytes, facts: InvoiceFacts, with_total: bool) -> bytes | None:
    """``xml`` with its first document-level allowance or charge 1.00 higher (and its
    stated total too where ``with_total``); None where the plant cannot be made."""
    first = facts.allowances_charges[0]
    if facts.syntax.startswith("UBL"):
        lines = min((i for n in _UBL_LINES if (i := xml.find(b"<cac:" + n)) >= 0), default=-1)
        entry = re.search(rb"<(?:\w+:)?AllowanceCharge\b", xml)
        if entry is None or (lines >= 0 and entry.start() > lines):
            return None
        amount = _value_at(xml, b"Amount", entry.end())
    else:
        header = max(xml.find(n) for n in _CII_HEADER)
        if header < 0:
            return None
        entry = re.compile(
            rb"<(?:\w+:)?(?:SpecifiedTradeAllowanceCharge|SpecifiedLogisticsServiceCharge)\b"
        ).search(xml, header)
        if entry is None:
            return None
        name = b"AppliedAmount" if b"Logistics" in entry.group(0) else b"ActualAmount"
        amount = _value_at(xml, name, entry.end())
    if amount is None:
        return None
    total = _value_at(xml, b"ChargeTotalAmount" if first.charge else b"AllowanceTotalAmount", 0)
    delta = Decimal("1.00")
    if with_total:
        if total is None:
            return None
        if total.start() > amount.start():  # bump the later one first: offsets stay right
            return _bump(_bump(xml, total, delta), amount, delta)
        return _bump(_bump(xml, amount, delta), total, delta)
    return _bump(xml, amount, delta)


def _checked(facts: InvoiceFacts, result: dict[str, object]) -> list[str]:
    """Where the accepted result differs from what the reader read (empty: none)."""
    wrong: list[str] = []
    entries = result.get("allowances_charges") or []
    assert isinstance(entries, list)
    if len(entries) != len(facts.allowances_charges):
        wrong.append(f"{len(entries)} entries, the XML {len(facts.allowances_charges)}")
    for got, read in zip(entries, facts.allowances_charges, strict=False):
        want = ("charge" if read.charge else "allowance", read.amount, read.tax_rate)
        if (got["kind"], Decimal(got["amount"]), Decimal(got["tax_rate"])) != want:
            wrong.append(f"entry {got} is not {want}")
    for name, value in (
        ("net_total", facts.net_total),
        ("tax_total", facts.tax_total),
        ("gross_total", facts.gross_total),
    ):
        field = result.get(name)
        if not isinstance(field, dict) or Decimal(field["value"]) != value:
            wrong.append(f"{name} {field} is not {value}")
    return wrong


#: The reasons a wrong allowance or charge amount can raise: the arithmetic's and the
#: reader's (entries that no longer make the stated total).
_CAUGHT_BY = frozenset(
    {"net_total_mismatch", "tax_base_mismatch", "einvoice_not_holdable:allowances_charges"}
)


def _codes(report: ValidationReport) -> set[str]:
    return {
        r.code.value
        + (f":{r.detail.split(':')[0]}" if r.code is ReasonCode.EINVOICE_NOT_HOLDABLE else "")
        for r in report.reasons
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", help="bare git mirrors or folders")
    args = parser.parse_args(argv)
    counts: collections.Counter[str] = collections.Counter()
    reasons: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    documents = (doc for source in args.sources for doc in corpus_einvoices(CorpusTree(source)))
    for path, xml, page in documents:
        outcome = decide(xml, page)
        facts = read_invoice_xml(xml)
        if not facts.allowances_charges:
            continue
        before = _codes(outcome.report)
        if outcome.report.decision is Decision.SUCCEEDED:
            group = "succeeded"
            wrong = _checked(facts, outcome.result())
            counts["succeeded: values differ from the XML"] += bool(wrong)
        elif not before & _CAUGHT_BY:
            group = "reviewed, arithmetic clean"  # reviewed for something else only
            wrong = []
        else:
            continue
        counts[group] += 1
        print(f"{path}: {group}, {len(facts.allowances_charges)} entries, {sorted(before)}")
        for line in wrong:
            print(f"  WRONG {line}")
        for kind, with_total in (("entry", False), ("entry_and_total", True)):
            planted = plant(xml, facts, with_total)
            again = None if planted is None else read_invoice_xml(planted).allowances_charges
            first = facts.allowances_charges[0].amount
            if not again or first is None or again[0].amount != first + 1:
                counts[f"{group}: {kind}: not plantable"] += 1
                continue
            assert planted is not None
            report = decide(planted, page).report
            new = _codes(report) - before
            if group == "succeeded":
                verdict = "review" if report.decision is Decision.REVIEW_REQUIRED else "ACCEPTED"
            else:
                verdict = "caught" if new & _CAUGHT_BY else "MISSED"
            counts[f"{group}: {kind}: planted"] += 1
            counts[f"{group}: {kind}: {verdict}"] += 1
            reasons[f"{group}: {kind}"].update(new)
            print(f"  {kind:16} {verdict:8} new reasons {sorted(new)}")
    for key, count in sorted(counts.items()):
        print(f"{count:4d} {key}")
    for kind, counter in reasons.items():
        print(f"{kind}: {dict(counter.most_common())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
