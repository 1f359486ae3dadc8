"""Every corpus PDF's embedded XML through the worker's e-invoice path (issue 44).

``python -m benchmarks.corpus.xml_read MIRROR`` reads each valid corpus PDF
(:mod:`benchmarks.corpus.tree`), takes its embedded e-invoice XML, and decides it with
:func:`pipeline.worker.interpret_einvoice` as a job would: the page text cross-checked,
a tenant that has the XML's supplier, IBANs and currency on file, "today" the day after
issue. It prints how many read, SUCCEEDED and REVIEW_REQUIRED with each reason, the time
per invoice (read and validate; the PDF's text extraction not counted), and, for each
SUCCEEDED one, whether a page printing another gross total goes to ``xml_text_mismatch``.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

from benchmarks.corpus.document_types import DocumentTypes
from benchmarks.corpus.embedded import decide, embedded_invoices
from benchmarks.corpus.holdable import amount_spellings
from benchmarks.corpus.rules_tally import RulesTally
from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import warm_rules, warm_schemas
from pipeline.invoice import ReasonCode
from pipeline.validation import Decision


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="the ZUGFeRD corpus: a bare git mirror or folder")
    args = parser.parse_args(argv)
    tree = CorpusTree(args.corpus)
    stats: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    planted: collections.Counter[str] = collections.Counter()
    times: list[float] = []
    types = DocumentTypes()
    started = time.perf_counter()
    warm_schemas()  # as the worker's driver does at start (Driver._warm): the times
    warm_rules()  # below are an attempt's, not the first one's compiling
    print(f"schemas and EN 16931 rules compiled in {time.perf_counter() - started:.2f} s")
    rules = RulesTally()
    documents = tree.documents()
    for doc in embedded_invoices(tree):
        if isinstance(doc, str):
            stats[doc] += 1
            continue
        started = time.perf_counter()
        outcome = decide(doc.xml, doc.page)
        times.append(time.perf_counter() - started)
        stats[outcome.report.decision.value] += 1
        codes = {
            r.code.value
            + (f":{r.detail.split(':')[0]}" if r.code is ReasonCode.EINVOICE_NOT_HOLDABLE else "")
            + (f":{r.field}" if r.code is ReasonCode.EINVOICE_INVALID else "")
            for r in outcome.report.reasons
        }
        reasons.update(codes)
        rules.add(doc.xml, outcome, codes)
        facts = doc.facts
        types.add(doc.path, facts, outcome)
        if outcome.report.decision is Decision.SUCCEEDED and facts and facts.gross_total:
            forged = doc.page
            for spelling in sorted(amount_spellings(facts.gross_total), key=len, reverse=True):
                forged = forged.replace(spelling, "999999,99")
            again = decide(doc.xml, forged)
            caught = any(r.code is ReasonCode.XML_TEXT_MISMATCH for r in again.report.reasons)
            planted["xml_text_mismatch" if caught else "missed"] += 1
    print(f"documents {len(documents)} (commit {tree.commit()})")
    print(dict(stats))
    for code, count in reasons.most_common():
        print(f"  {count:4d} {code}")
    if times:
        times.sort()
        print(
            f"per invoice: median {times[len(times) // 2] * 1000:.1f} ms, "
            f"mean {sum(times) / len(times) * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms"
        )
    print(f"gross total changed on the page of each SUCCEEDED: {dict(planted)}")
    print("by document type:")
    print("\n".join(types.lines()))
    print("EN 16931 rules (reasons of the documents that pass them and review):")
    print("\n".join(rules.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
