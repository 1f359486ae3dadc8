"""``fenceline corpus einvoices``: the public ZUGFeRD/Factur-X corpus as an eval dataset.

For every valid PDF of the corpus (a bare git mirror of ``ZUGFeRD/corpus`` or a checkout):
the embedded XML gives the truth, ``pdftotext -layout`` the text, the holdability check
the expected decision. One progress line per document goes to stderr; the summary to
stdout and, as JSON, next to the dataset (``FILE.summary.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.corpus.pdf import require_poppler
from benchmarks.corpus.records import (
    CorpusRecord,
    NoEmbeddedXml,
    NoTruth,
    deduplicate,
    record_from_pdf,
    source_of,
)
from benchmarks.corpus.tree import CorpusTree


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mirror",
        type=Path,
        required=True,
        help="the corpus: a bare git directory (a mirror of github.com/ZUGFeRD/corpus) or a folder",
    )
    p.add_argument("--out", type=Path, required=True, help="dataset file to write (JSON lines)")
    p.add_argument("--limit", type=int, default=None, help="read only the first N documents")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


@dataclass
class Tally:
    """What the run found; :meth:`summary` is what it reports."""

    documents: int = 0
    with_xml: int = 0
    unreadable: list[dict[str, str]] = field(default_factory=list)
    records: list[CorpusRecord] = field(default_factory=list)

    def summary(self, written: list[CorpusRecord], dropped: int, distinct: int) -> dict[str, Any]:
        per_family: Counter[str] = Counter(r.family for r in written)
        per_source: dict[str, Counter[str]] = {}
        for r in self.records:
            c = per_source.setdefault(f"{source_of(r.path)}:{r.facts.profile}", Counter())
            c["documents"] += 1
            c["with_line_items"] += bool(r.facts.items)
            c["holdable"] += r.holdable
        distinct_holdable = {r.key for r in self.records if r.holdable}
        distinct_items = {r.key for r in self.records if r.facts.items}
        only_iban = [r for r in self.records if r.obstacle_codes == ["no_iban"]]
        return {
            "documents": self.documents,
            "with_xml": self.with_xml,
            "read": len(self.records),
            "unreadable": self.unreadable,
            "with_line_items": sum(bool(r.facts.items) for r in self.records),
            "holdable": sum(r.holdable for r in self.records),
            "distinct_invoices": distinct,
            "distinct_with_line_items": len(distinct_items),
            "distinct_holdable": len(distinct_holdable),
            "holdable_but_for_iban": len(only_iban),
            "written": len(written),
            "written_holdable": sum(r.holdable for r in written),
            "repeats_dropped": dropped,
            "repeats_flagged": sum(r.repeat_of is not None for r in written),
            "obstacles": dict(
                Counter(
                    o.code for r in self.records for o in {x.code: x for x in r.obstacles}.values()
                ).most_common()
            ),
            "per_source_profile": {k: dict(v) for k, v in sorted(per_source.items())},
            "per_family_written": dict(sorted(per_family.items())),
        }


def _read_one(tree: CorpusTree, path: str, tally: Tally) -> str:
    with tempfile.TemporaryDirectory(prefix="fenceline-corpus-") as tmp:
        pdf = Path(tmp) / "document.pdf"
        pdf.write_bytes(tree.read(path))
        try:
            record = record_from_pdf(pdf, path)
        except NoEmbeddedXml as exc:
            tally.unreadable.append({"path": path, "why": str(exc)})
            return str(exc)
        except NoTruth as exc:
            tally.with_xml += 1
            tally.unreadable.append({"path": path, "why": str(exc)})
            return f"no truth ({exc})"
    tally.with_xml += 1
    tally.records.append(record)
    if record.holdable:
        return "holdable"
    return "not holdable: " + ", ".join(record.obstacle_codes)


def _render(summary: dict[str, Any], out: Path) -> str:
    lines = [
        f"documents {summary['documents']}, with XML {summary['with_xml']}, "
        f"read {summary['read']}, with line items {summary['with_line_items']}, "
        f"holdable {summary['holdable']} "
        f"({summary['holdable_but_for_iban']} more but for the IBAN)",
        f"distinct invoices {summary['distinct_invoices']} "
        f"(with line items {summary['distinct_with_line_items']}, "
        f"holdable {summary['distinct_holdable']})",
        f"written {summary['written']} to {out} ({summary['written_holdable']} holdable; "
        f"{summary['repeats_dropped']} repeats dropped within a family, "
        f"{summary['repeats_flagged']} flagged repeat_of across families)",
        "obstacles: " + ", ".join(f"{k} {v}" for k, v in summary["obstacles"].items()),
        "per source:profile (documents / with items / holdable):",
    ]
    for name, c in summary["per_source_profile"].items():
        lines.append(
            f"  {name:<40} {c['documents']:>3} / {c.get('with_line_items', 0):>3} "
            f"/ {c.get('holdable', 0):>3}"
        )
    for item in summary["unreadable"]:
        lines.append(f"unreadable: {item['path']}: {item['why']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Read the corpus, write the dataset; 0 when at least one line was written."""
    require_poppler()
    tree = CorpusTree(args.mirror)
    if not args.mirror.is_dir():
        print(f"fenceline corpus: {args.mirror} is no folder", file=sys.stderr)
        return 2
    paths = tree.documents()[: args.limit]
    tally = Tally(documents=len(paths))
    for n, path in enumerate(paths, start=1):
        outcome = _read_one(tree, path, tally)
        if not args.quiet:
            print(f"[{n}/{len(paths)}] {path}: {outcome}", file=sys.stderr, flush=True)
    dedup = deduplicate(tally.records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for record in dedup.kept:
            fh.write(json.dumps(record.line(), ensure_ascii=False) + "\n")
    summary = tally.summary(dedup.kept, len(dedup.dropped), dedup.distinct)
    summary["source"] = {"path": str(args.mirror), "commit": tree.commit()}
    summary["dropped"] = [{"path": p, "same_as": k} for p, k in dedup.dropped]
    summary_path = args.out.with_name(args.out.name + ".summary.json")
    summary_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(_render(summary, args.out))
    return 0 if dedup.kept else 1
