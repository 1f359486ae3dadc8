"""A leave-one-transformation-out report: per transformation ``T``, the control adapter,
the adapter that never saw ``T``, and perfect answers, on the same invoices of ``T``.

Each column counts invoices, accepted (SUCCEEDED), accepted with every field right,
reviewed, failed (malformed or an engine error), and false accepts with their
one-sided 95 % Clopper-Pearson upper bound (:func:`benchmarks.eval.bounds.false_accept_bound`).
The live columns are read from ``fenceline eval`` report rows; the ceiling from the
fuzzer's judged perfect answers (:class:`benchmarks.fuzz.campaign.Trial`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.eval.bounds import false_accept_bound
from benchmarks.fuzz.campaign import Trial

#: The columns of one transformation's comparison, in table order.
COLUMNS = ("control", "left_out", "ceiling")


def _tally(n: int, accepted: int, right: int, reviewed: int, false_accepts: int) -> dict[str, Any]:
    return {
        "invoices": n,
        "accepted": accepted,
        "accepted_right": right,
        "reviewed": reviewed,
        "failed": n - accepted - reviewed,
        "false_accepts": false_accepts,
        "false_accept_bound": false_accept_bound(false_accepts, n),
    }


def live_tally(rows: Sequence[dict[str, Any]], transform: str) -> dict[str, Any]:
    """The ``fenceline eval`` rows of invoices fuzzed by ``transform`` alone, counted.

    A row's ``family`` is the dataset line's (``fenceline fuzz --export``); a row of
    another family is not counted.
    """
    mine = [r for r in rows if r.get("family") == transform]
    accepted = [r for r in mine if r["outcome"] == "SUCCEEDED"]
    return _tally(
        len(mine),
        len(accepted),
        sum(1 for r in accepted if r["exact_match"]),
        sum(1 for r in mine if r["outcome"] == "REVIEW_REQUIRED"),
        sum(1 for r in mine if r["false_accept"]),
    )


def ceiling_tally(trials: Sequence[Trial], transform: str) -> dict[str, Any]:
    """Perfect answers for the invoices of ``transform`` alone, judged, counted."""
    mine = [t for t in trials if t.family == transform]
    accepted = [t for t in mine if t.decision == "SUCCEEDED"]
    return _tally(
        len(mine),
        len(accepted),
        sum(1 for t in accepted if not t.wrong),
        sum(1 for t in mine if t.decision == "REVIEW_REQUIRED"),
        sum(1 for t in mine if t.false_accept),
    )


def compare(
    transform: str,
    control_rows: Sequence[dict[str, Any]] | None,
    left_out_rows: Sequence[dict[str, Any]] | None,
    ceiling: Sequence[Trial],
    trained: dict[str, int | None] | None = None,
) -> dict[str, Any]:
    """One transformation's comparison; a live column not measured is None.

    ``gap`` is what leaving ``T`` out cost: the control's accepted-right count less the
    left-out adapter's (positive when seeing ``T`` in training helped). ``trained``
    holds how many training examples of ``T`` each adapter took (:func:`examples_of`):
    a short run's control may never have reached ``T``, and then the gap is the
    variation between two runs, not what seeing ``T`` is worth.

    Raises:
        ValueError: the columns scored different numbers of invoices of ``T``.
    """
    out: dict[str, Any] = {
        "transform": transform,
        "control": None if control_rows is None else live_tally(control_rows, transform),
        "left_out": None if left_out_rows is None else live_tally(left_out_rows, transform),
        "ceiling": ceiling_tally(ceiling, transform),
        "trained_examples": dict(trained or {}),
    }
    sizes = {out[c]["invoices"] for c in COLUMNS if out[c] is not None}
    if len(sizes) != 1:
        raise ValueError(f"{transform}: the columns scored different invoices ({sorted(sizes)})")
    both = out["control"] is not None and out["left_out"] is not None
    out["gap"] = (
        out["control"]["accepted_right"] - out["left_out"]["accepted_right"] if both else None
    )
    return out


def examples_of(manifest: dict[str, Any], transform: str) -> int | None:
    """How many of an adapter's trained examples ``transform`` printed (alone or with
    another), from its ``manifest.json`` counts; None where the manifest has none."""
    counts = (manifest.get("counts") or {}).get("fuzz_family")
    if not isinstance(counts, dict):
        return None
    return sum(int(n) for family, n in counts.items() if transform in str(family).split("+"))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _cell(t: dict[str, Any] | None) -> str:
    if t is None:
        return "not measured"
    return (
        f"{t['accepted_right']}/{t['invoices']} right, {t['accepted']} accepted, "
        f"{t['false_accepts']} FA (≤ {_pct(t['false_accept_bound'])})"
    )


def markdown(comparisons: Sequence[dict[str, Any]], run: dict[str, Any]) -> str:
    """The table docs/fuzzer.md quotes: a row per transformation, and the run's budget."""
    lines = [
        "# Leave-one-transformation-out",
        "",
        f"Continued from `{run.get('init_adapter')}`; each adapter: {run.get('budget')}.",
        f"Evaluation seeds {run.get('eval_seeds')}, each transformation alone.",
        "",
        "| left out | control | adapter without it | perfect answers | gap | examples of it "
        "trained (control / without) |",
        "|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        gap = "-" if c["gap"] is None else f"{c['gap']:+d}"
        seen = c.get("trained_examples") or {}
        trained = " / ".join(
            "?" if seen.get(k) is None else str(seen[k]) for k in ("control", "left_out")
        )
        lines.append(
            f"| `{c['transform']}` | {_cell(c['control'])} | {_cell(c['left_out'])} | "
            f"{_cell(c['ceiling'])} | {gap} | {trained} |"
        )
    steps = {n: a.get("steps") for n, a in (run.get("adapters") or {}).items() if a}
    if steps:
        lines += ["", "Steps trained: " + ", ".join(f"{n} {k}" for n, k in steps.items()) + "."]
    missing = run.get("not_measured") or []
    if missing:
        lines += ["", "Not measured: " + ", ".join(f"`{m}`" for m in missing) + "."]
    lines += ["", "Commands:", "", *(f"    {cmd}" for cmd in run.get("commands", []))]
    return "\n".join(lines) + "\n"


def write(out: Path, transform: str, comparison: dict[str, Any], run: dict[str, Any]) -> Path:
    """``OUT/loto-T.json`` and ``OUT/loto-T.md``; returns the JSON path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"loto-{transform}.json"
    path.write_text(json.dumps({**run, **comparison}, indent=1, ensure_ascii=False) + "\n")
    (out / f"loto-{transform}.md").write_text(markdown([comparison], run))
    return path
