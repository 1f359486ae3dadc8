"""Corpus outcomes by document type (issue 47 item 2): credit notes and corrections.

The readers (:mod:`benchmarks.corpus.ubl_read`, :mod:`benchmarks.corpus.xml_read`) count
each decided e-invoice by the document type its XML states (the UBL root, the type
code: ``invoice``, ``credit_note``, ``corrective_invoice``) and its decision, and list
every credit note or correction SUCCEEDED with a result that is not of its type: a
credit accepted as an invoice, which the ERP would pay (0 required).
"""

from __future__ import annotations

import collections
from typing import Any

from pipeline.extraction.einvoice_facts import InvoiceFacts


class DocumentTypes:
    """Decisions per stated document type, and the credits accepted as anything else."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.mistyped: list[str] = []

    def add(self, path: str, facts: InvoiceFacts | None, outcome: Any) -> None:
        """Count one decided document (``outcome``: an ``Interpretation``)."""
        stated = facts.document_type if facts is not None else "unread"
        decision = outcome.report.decision.value
        self.counts[(stated, decision)] += 1
        if decision == "SUCCEEDED" and outcome.extraction.document_type != stated:
            self.mistyped.append(path)

    def lines(self) -> list[str]:
        out = []
        for stated in sorted({s for s, _ in self.counts}):
            by = {d: n for (s, d), n in self.counts.items() if s == stated}
            out.append(
                f"  {stated:18} read {sum(by.values()):4d}, SUCCEEDED {by.get('SUCCEEDED', 0):4d}, "
                f"REVIEW_REQUIRED {by.get('REVIEW_REQUIRED', 0):4d}"
            )
        out.append(f"  accepted as another document type: {len(self.mistyped)} {self.mistyped}")
        return out
