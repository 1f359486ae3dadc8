"""How the demo shows its invoices: the per-invoice table, the summary line, the PNG.

Pure text formatting (tested in ``tests/unit/test_demo_view.py``) plus one
matplotlib figure that draws the same table, the decision cell coloured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.demo.rows import COMPARED_FIELDS, FAILED, REVIEW, SUCCEEDED, InvoiceRow

NOTHING = "—"
DECISION_COLOURS = {SUCCEEDED: "#8fd19e", REVIEW: "#ffd27f", FAILED: "#f4a3a3"}
UNSETTLED_COLOUR = "#d9d9d9"
TRUTH_WIDTH = 48

#: (header, width) of the text table; the last column takes what it needs.
#: The job id is left out (``demo.json`` has it); the state-change lines name the seed.
COLUMNS = (
    ("#", 2),
    ("seed variant", 27),
    ("sent as", 7),
    ("expected", 15),
    ("decision", 15),
    ("supplier", 32),
    ("number", 13),
    ("gross", 14),
    ("ERP", 11),
    ("reasons", 36),
    ("= truth", 0),
)


def _clip(text: str, width: int) -> str:
    if width <= 0 or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def join_fit(items: Sequence[str], width: int) -> str:
    """``a, b +3 more``: as many items as fit in ``width``, then how many were left out."""
    if not items:
        return ""
    shown: list[str] = []
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        candidate = ", ".join([*shown, item]) + (f" +{rest} more" if rest else "")
        if shown and len(candidate) > width:
            break
        shown.append(item)
    left = len(items) - len(shown)
    return ", ".join(shown) + (f" +{left} more" if left else "")


def invoice_label(row: InvoiceRow) -> str:
    return f"{row.seed} {row.variant}"


def document_label(row: InvoiceRow) -> str:
    """``text``, ``XML``, ``PDF`` or ``scan``: whether the invoice was pasted or uploaded
    as a file, and as what."""
    return {"pdf": "PDF", "xml": "XML"}.get(row.document, row.document)


def gross_label(row: InvoiceRow) -> str:
    if row.gross_total is None:
        return NOTHING
    return f"{row.gross_total} {row.currency or '?'}"


def truth_label(row: InvoiceRow, width: int = TRUTH_WIDTH) -> str:
    """``✓``, ``✗ field, field``, ``✗ 12/12: field, field +10 more`` or ``– nothing extracted``."""
    if row.matches_truth is None:
        return "– nothing extracted"
    if row.matches_truth:
        return "✓"
    fields = row.differing_fields
    if len(", ".join(fields)) + 2 <= width:
        return "✗ " + ", ".join(fields)
    head = f"✗ {len(fields)}/{len(COMPARED_FIELDS)}: "
    return head + join_fit(fields, width - len(head))


def cells(row: InvoiceRow) -> list[str]:
    """The table's cells for one row, in :data:`COLUMNS` order, unclipped."""
    return [
        str(row.index),
        invoice_label(row),
        document_label(row),
        row.expected,
        row.decision,
        row.supplier or NOTHING,
        row.invoice_number or NOTHING,
        gross_label(row),
        row.erp,
        join_fit(row.reasons, dict(COLUMNS)["reasons"]) or NOTHING,
        truth_label(row),
    ]


def format_table(rows: Sequence[InvoiceRow]) -> list[str]:
    """Header, rule and one line per invoice; columns clipped to their widths with ``…``."""

    def line(values: Sequence[str]) -> str:
        parts = [
            _clip(v, w).rjust(w) if i == 0 else _clip(v, w).ljust(w)
            for i, (v, (_, w)) in enumerate(zip(values, COLUMNS, strict=True))
        ]
        return "  ".join(parts).rstrip()

    header = line([h for h, _ in COLUMNS])
    return [header, "-" * len(header)] + [line(cells(r)) for r in rows]


def format_summary(summary: Mapping[str, Any]) -> str:
    """The one-line verdict under the table."""
    unsettled = summary.get("unsettled", 0)
    return (
        f"{summary['succeeded']} SUCCEEDED, {summary['review_required']} REVIEW_REQUIRED, "
        f"{summary['failed']} FAILED"
        + (f", {unsettled} unsettled" if unsettled else "")
        + f" | {summary['posted_exactly_once']} posted to the ERP exactly once"
        + (
            f" ({summary['posted_more_than_once']} MORE THAN ONCE)"
            if summary.get("posted_more_than_once")
            else ""
        )
        + f" | false accepts {summary['false_accepts']}"
        + f" | decisions as expected {summary['decisions_as_expected']}/{summary['invoices']}"
        + f" | extracted = truth {summary['extracted_equal_to_truth']}/{summary['invoices']}"
        + f" | wall time {summary['wall_seconds']:.0f} s"
    )


def plot_invoices(rows: Sequence[InvoiceRow], summary: Mapping[str, Any], path: Path) -> Path:
    """``path`` (PNG): the per-invoice table, decision and truth cells coloured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import Bbox

    headers = [h for h, _ in COLUMNS]
    body = [[_clip(c, TRUTH_WIDTH) for c in cells(r)] for r in rows]
    fig_h = 1.0 + 0.32 * (max(len(rows), 1) + 1)
    fig, ax = plt.subplots(figsize=(20, fig_h))
    ax.axis("off")
    table = ax.table(
        cellText=body or [[""] * len(headers)],
        colLabels=headers,
        cellLoc="left",
        colLoc="left",
        bbox=Bbox.from_bounds(0.0, 0.0, 1.0, 1.0),
    )
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.auto_set_column_width(list(range(len(headers))))
    decision, truth, erp = (headers.index(h) for h in ("decision", "= truth", "ERP"))
    for i, r in enumerate(rows, start=1):
        table[i, decision].set_facecolor(DECISION_COLOURS.get(r.decision, UNSETTLED_COLOUR))
        if r.matches_truth is not None:
            table[i, truth].set_facecolor("#8fd19e" if r.matches_truth else "#f4a3a3")
        if r.erp_applications > 1 or r.false_accept:
            table[i, erp].set_facecolor("#f4a3a3")
    for j in range(len(headers)):
        table[0, j].set_facecolor("#e6e6e6")
    ax.set_title(
        "Fenceline demo: what was extracted, decided and posted\n" + format_summary(summary),
        fontsize=10,
        loc="left",
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
