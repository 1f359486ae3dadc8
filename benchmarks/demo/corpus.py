"""The demo's invoices: which seeds, which tenants, which traps, dated before which day.

Demo seeds: invoice ``i`` is generator seed ``DemoOptions.seed + i`` (2026 ..
2033 by default), dated shortly before :data:`DEMO_ANCHOR`, a fixed day: the
same code prints the same pages, and shows the same outcome, whatever day it
runs (:func:`demo_anchor` moves to today only once that day's invoices would be
too old for the validation policy, and says so). Seeds from
:data:`TRAINING_SEEDS_FROM` up are reserved for adapter training, so the demo
refuses them (it must never show an invoice the model was trained on).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
from pipeline.validation import DEFAULT_POLICY, ValidationPolicy

TENANTS = (("acme-gmbh", 2), ("globex-ltd", 1), ("initech-sa", 1))
#: Every 4th invoice is adversarial, in this order. Both are printed into the
#: document, so even a faithful transcription must go to REVIEW_REQUIRED (a
#: prompt injection is not here: a model that ignores it rightly SUCCEEDS).
ADVERSARIAL = (Variant.ARITHMETIC_OFF_BY_CENT, Variant.HOMOGLYPH_SUPPLIER)
#: Generator seeds from here up are reserved for adapter training.
TRAINING_SEEDS_FROM = 1_000_000
MAX_DEMO_LINE_ITEMS = 8
#: The day the demo's invoices are dated just before (20-59 days; see
#: ``benchmarks.invoices.plan``). Fixed, so a run's outcome depends on the code
#: and not on the calendar: with a moving anchor, seed 2029 printed "21 października
#: 2026" on one day and "20 października 2026" the day before, and SmolLM2 read the
#: two pages differently. The day of the last recorded 8/8 run (docs/history/benchmarks-passes.md).
DEMO_ANCHOR = date(2026, 12, 4)
#: The generator dates an invoice at most this many days before its anchor.
ANCHOR_LEAD_DAYS = 59


@dataclass(frozen=True)
class DemoOptions:
    invoices: int = 8
    max_line_items: int = 3
    drivers: int = 2
    driver_concurrency: int = 4
    timeout_s: float = 1200.0
    out_dir: Path = Path("results/demo")
    seed: int = 2026
    #: Keep the cluster (and the review console) up after the report until Ctrl-C.
    keep: bool = False
    #: Date the invoices shortly before this day; None: today.
    anchor: date | None = DEMO_ANCHOR


def demo_anchor(
    opts: DemoOptions, today: date, policy: ValidationPolicy = DEFAULT_POLICY
) -> tuple[date, str | None]:
    """The day to date the demo's invoices before, and why it is not the one asked for.

    The drivers validate against the real clock, so every issue date must lie within
    the policy's window around ``today``: an anchor whose oldest invoice would be
    older than ``max_invoice_age_days``, or one after today, gives way to today.
    """
    if opts.anchor is None:
        return today, None
    oldest = opts.anchor - timedelta(days=ANCHOR_LEAD_DAYS)
    if oldest < today - timedelta(days=policy.max_invoice_age_days):
        return today, (
            f"invoices dated before {opts.anchor} would be over "
            f"{policy.max_invoice_age_days} days old today: dated before today ({today}) "
            "instead, so the outcome may differ from the recorded one"
        )
    if opts.anchor > today:
        return today, f"{opts.anchor} is after today: invoices dated before today ({today})"
    return opts.anchor, None


def corpus(opts: DemoOptions, anchor: date | None = None) -> list[tuple[str, GeneratedInvoice]]:
    """Invoices assigned to tenants: the first tenant gets a backlog, the others a few each.

    Six of the default eight are clean; invoices 4 and 8 (seeds 2029, 2033) are
    an arithmetic off by a cent and a homoglyph supplier name (invoice 4 is sent as a
    scan and invoice 5 as a PDF: :mod:`benchmarks.demo.documents`). Dated before
    ``anchor``, by default :func:`demo_anchor`'s day for today.
    """
    if opts.seed < 0 or opts.seed + opts.invoices > TRAINING_SEEDS_FROM:
        raise ValueError(
            f"demo seeds {opts.seed}..{opts.seed + opts.invoices - 1} must stay below "
            f"{TRAINING_SEEDS_FROM:_} (reserved for adapter training)"
        )
    if not 1 <= opts.max_line_items <= MAX_DEMO_LINE_ITEMS:
        raise ValueError(f"max_line_items must be 1..{MAX_DEMO_LINE_ITEMS}")
    if anchor is None:
        anchor, _ = demo_anchor(opts, datetime.now(UTC).date())
    out = []
    for i in range(opts.invoices):
        variant = ADVERSARIAL[(i // 4) % len(ADVERSARIAL)] if i % 4 == 3 else Variant.CLEAN
        inv = generate_invoice(
            opts.seed + i, variant, max_line_items=opts.max_line_items, anchor=anchor
        )
        tenant = TENANTS[0][0] if i % 2 == 0 else TENANTS[1 + (i // 2) % 2][0]
        out.append((tenant, inv))
    return out
