"""Corpus outcomes by EN 16931's business rules (issue 44): which documents pass them.

The readers (:mod:`benchmarks.corpus.ubl_read`, :mod:`benchmarks.corpus.xml_read`) count
each decided e-invoice as ``not checked`` (the rules do not apply to its syntax or
profile, or its XSD refused it first), ``fails`` (a fatal rule: ``einvoice_invalid`` on
field ``rules``) or ``passes``; of those that pass, how many are SUCCEEDED, and the
reasons of those that pass and still review: what EN 16931 calls a valid invoice and
Fenceline does not accept yet.
"""

from __future__ import annotations

import collections
from typing import Any

from pipeline.extraction.xml_schematron import rules_for_xml
from pipeline.invoice import ReasonCode


class RulesTally:
    """Documents per rules outcome, and the reasons of those that pass but review."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[str] = collections.Counter()

    def add(self, xml: bytes, outcome: Any, codes: set[str]) -> None:
        """Count one decided document (``outcome``: an ``Interpretation``; ``codes``: its
        reasons as the reader prints them)."""
        invalid = {r.field for r in outcome.report.reasons if r.code is ReasonCode.EINVOICE_INVALID}
        if "rules" in invalid:
            self.counts["fails"] += 1
            return
        if invalid or rules_for_xml(xml) is None:
            self.counts["not checked"] += 1
            return
        self.counts["passes"] += 1
        decision = outcome.report.decision.value
        self.counts[f"passes, {decision}"] += 1
        if decision != "SUCCEEDED":
            self.reasons.update(codes)

    def lines(self) -> list[str]:
        out = [f"  {dict(sorted(self.counts.items()))}"]
        out += [f"  {count:4d} {code}" for code, count in self.reasons.most_common()]
        return out
