"""Fingerprints of what extraction makes of generated invoices, to prove a change changes nothing.

A change meant to alter only how fast extraction runs (issue 41: bounded work per
document) must leave every call and every interpretation as they were. This script
writes, per generated invoice (seed x :class:`~benchmarks.invoices.Variant`), a digest
of :func:`~pipeline.extraction.extractor.prepare_call` (messages, JSON schema,
``max_tokens``) and of :func:`~pipeline.worker.interpret` on the perfect
answer (decision, reasons, extraction); run it on two commits and compare the files::

    PYTHONPATH=<checkout> python -m benchmarks.fingerprints write before.json --seeds 0-299
    PYTHONPATH=<checkout> python -m benchmarks.fingerprints compare before.json after.json

It uses only what extraction offered before that change, so it runs on either commit
(copy the file into the older checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from typing import Any

from benchmarks.invoices import Variant, generate_invoice
from pipeline.extraction.extractor import answer_for, prepare_call
from pipeline.worker import interpret


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(seed: int, variant: Variant, max_line_items: int) -> dict[str, str]:
    """The call's and the interpretation's digests for one generated invoice."""
    inv = generate_invoice(seed, variant, max_line_items=max_line_items)
    call = prepare_call(inv.ocr_text)
    outcome = interpret(
        answer_for(inv.truth, inv.ocr_text), inv.ocr_text, inv.master_data, today=inv.today
    )
    report = outcome.report.as_dict()
    return {
        "call": _digest([call.messages, call.json_schema, call.max_tokens]),
        "interpretation": _digest(
            [report.get("decision"), report.get("reasons"), outcome.result()]
        ),
    }


def write(path: str, first: int, last: int, max_line_items: int) -> None:
    started = time.process_time()
    out = {
        f"{seed}:{variant.value}": fingerprint(seed, variant, max_line_items)
        for seed in range(first, last + 1)
        for variant in Variant
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{len(out)} invoices, {time.process_time() - started:.1f} s CPU -> {path}")


def compare(before_path: str, after_path: str) -> int:
    """Print the counts of equal and different digests; 1 if any differs or is missing."""
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    with open(after_path, encoding="utf-8") as f:
        after = json.load(f)
    missing = sorted(set(before) ^ set(after))
    failed = bool(missing)
    for part in ("call", "interpretation"):
        keys = sorted(set(before) & set(after))
        differ = [k for k in keys if before[k][part] != after[k][part]]
        print(f"{part}: {len(keys) - len(differ)} equal, {len(differ)} different")
        for k in differ[:20]:
            print(f"  differs: {k}")
        failed = failed or bool(differ)
    if missing:
        print(f"in one file only: {len(missing)} ({', '.join(missing[:10])})")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="fingerprint seeds x every variant into a JSON file")
    w.add_argument("path")
    w.add_argument("--seeds", default="0-299", help="first-last, inclusive")
    w.add_argument("--max-line-items", type=int, default=200)
    c = sub.add_parser("compare", help="compare two fingerprint files")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "write":
        first, _, last = args.seeds.partition("-")
        write(args.path, int(first), int(last or first), args.max_line_items)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
