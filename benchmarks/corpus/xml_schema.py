"""Every CII and UBL XML file of the fetched corpora checked against its shipped XSD.

``python -m benchmarks.corpus.xml_schema SOURCE...`` (bare git mirrors or folders: the
ZUGFeRD corpus, ``ConnectingEurope/eInvoicing-EN16931``,
``itplr-kosit/xrechnung-testsuite``) runs each ``.xml`` file that parses and whose root
is a CII or UBL invoice through :func:`pipeline.extraction.xml_schema.check_schema`, and
prints per schema how many validate, the invalid ones with the validator's first
message, and the time per check (the first of each schema includes compiling it).
Files embedded in PDFs are counted by ``benchmarks.corpus.xml_read``.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import time
from pathlib import Path

from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import NotAnEInvoice
from pipeline.extraction.xml_schema import check_schema
from pipeline.extraction.xml_tree import local, parse_xml

_ROOTS = {"CrossIndustryInvoice", "CrossIndustryDocument", "Invoice", "CreditNote"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", help="bare git mirrors or folders")
    args = parser.parse_args(argv)
    counts: collections.Counter[tuple[str, bool]] = collections.Counter()
    invalid: list[str] = []
    times: list[float] = []
    for source in args.sources:
        tree = CorpusTree(source)
        print(f"{source} (commit {tree.commit()})")
        for path in (p for p in tree.paths() if p.lower().endswith(".xml")):
            try:
                xml = tree.read(path)
            except subprocess.CalledProcessError:  # a blob the mirror lists but lacks
                counts[("(not in the mirror)", False)] += 1
                continue
            try:
                root = parse_xml(xml)
            except NotAnEInvoice:
                continue
            if local(root.tag) not in _ROOTS:
                continue
            started = time.perf_counter()
            check = check_schema(xml)
            times.append(time.perf_counter() - started)
            counts[(check.schema or "(none shipped)", check.valid)] += 1
            if not check.valid:
                invalid.append(f"  {path}\n      {check.messages[0][:200]}")
    for (schema, valid), n in sorted(counts.items()):
        print(f"  {n:4d} {'valid  ' if valid else 'INVALID'} {schema}")
    print("invalid:")
    print("\n".join(invalid) or "  none")
    if times:
        times.sort()
        print(
            f"per check: median {times[len(times) // 2] * 1000:.1f} ms, "
            f"mean {sum(times) / len(times) * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
