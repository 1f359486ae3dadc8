"""Every standalone UBL e-invoice of one or more repositories through the worker's
e-invoice path (issue 44).

``python -m benchmarks.corpus.ubl_read SOURCE...`` reads every ``.xml`` file of each
source (a bare git mirror, read at ``HEAD``, or a folder; for example
``ConnectingEurope/eInvoicing-EN16931`` and ``itplr-kosit/xrechnung-testsuite``) whose
root element is a UBL 2.1 ``Invoice`` or ``CreditNote``, and decides it with
:func:`pipeline.worker.interpret_einvoice` as an XML upload would be (no page:
validation reads what the XML states): a tenant that has the XML's supplier, IBANs and
currency on file, "today" the day after issue.
``--cii`` reads the standalone CII files of the same sources instead (a root that
:func:`pipeline.extraction.cii.cii_facts` reads: the CEN and KoSIT CII examples,
XRechnung CII), decided the same way.
It prints how many were read, how many have no holdability obstacle,
SUCCEEDED and REVIEW_REQUIRED with each reason (``einvoice_not_holdable`` by obstacle),
and the time per invoice. Files that are no UBL invoice (CII, schemas, validator test
sets wrapping an invoice) are counted by why, not read.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks.corpus.document_types import DocumentTypes
from benchmarks.corpus.embedded import decide
from benchmarks.corpus.rules_tally import RulesTally
from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import NotAnEInvoice, obstacles, warm_rules, warm_schemas
from pipeline.extraction.cii import NotCrossIndustryInvoice, cii_facts
from pipeline.extraction.einvoice_facts import InvoiceFacts
from pipeline.extraction.ubl import is_ubl, ubl_facts
from pipeline.extraction.xml_tree import local, parse_xml
from pipeline.invoice import ReasonCode


def reason_codes(report_reasons: object) -> set[str]:
    """Each reason's code, ``einvoice_not_holdable`` with its obstacle (``...:credit_note``)."""
    out: set[str] = set()
    for r in report_reasons:  # type: ignore[attr-defined]
        code = r.code.value
        if r.code is ReasonCode.EINVOICE_NOT_HOLDABLE:
            code += f":{r.detail.split(':')[0]}"
        if r.code is ReasonCode.EINVOICE_INVALID:
            code += f":{r.field}"
        out.add(code)
    return out


def _facts(root: ET.Element, *, cii: bool) -> InvoiceFacts | None:
    """The facts of a UBL root (``cii``: of a CII root), None for any other root."""
    if not cii:
        return ubl_facts(root) if is_ubl(root) else None
    if is_ubl(root):
        return None
    try:
        return cii_facts(root)
    except NotCrossIndustryInvoice:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", help="bare git mirrors or folders")
    parser.add_argument("--verbose", action="store_true", help="one line per invoice")
    parser.add_argument("--cii", action="store_true", help="the standalone CII files instead")
    args = parser.parse_args(argv)
    skipped: collections.Counter[str] = collections.Counter()
    stats: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    times: list[float] = []
    types = DocumentTypes()
    started = time.perf_counter()
    warm_schemas()  # as the worker's driver does at start (Driver._warm): the times
    warm_rules()  # below are an attempt's, not the first one's compiling
    print(f"schemas and EN 16931 rules compiled in {time.perf_counter() - started:.2f} s")
    rules = RulesTally()
    for source in args.sources:
        tree = CorpusTree(source)
        print(f"{source} (commit {tree.commit()})")
        for path in (p for p in tree.paths() if p.lower().endswith(".xml")):
            try:
                xml = tree.read(path)
            except subprocess.CalledProcessError:  # a blob the mirror lists but lacks
                skipped["not held by the mirror"] += 1
                continue
            try:
                root = parse_xml(xml)
            except NotAnEInvoice as exc:
                skipped[str(exc).split(":")[0]] += 1
                continue
            facts = _facts(root, cii=args.cii)
            if facts is None:
                skipped[f"root {local(root.tag)}"] += 1
                continue
            started = time.perf_counter()
            outcome = decide(xml, "")
            times.append(time.perf_counter() - started)
            stats["read"] += 1
            types.add(path, facts, outcome)
            if not obstacles(facts, v3=True):  # the XML path holds contract v3
                stats["no obstacle"] += 1
            stats[outcome.report.decision.value] += 1
            codes = reason_codes(outcome.report.reasons)
            reasons.update(codes)
            rules.add(xml, outcome, codes)
            if args.verbose:
                print(f"  {outcome.report.decision.value:16} {path}  {sorted(codes)}")
    print(dict(stats))
    for code, count in reasons.most_common():
        print(f"  {count:4d} {code}")
    print("by document type:")
    print("\n".join(types.lines()))
    print("EN 16931 rules (reasons of the documents that pass them and review):")
    print("\n".join(rules.lines()))
    print(f"not read: {dict(skipped.most_common())}")
    if times:
        times.sort()
        print(
            f"per invoice: median {times[len(times) // 2] * 1000:.1f} ms, "
            f"mean {sum(times) / len(times) * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
