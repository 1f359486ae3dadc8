"""The evaluation report: rows aggregated (:func:`summarise`), one screen of text
(:func:`render_text`), a PNG (:func:`plot`) and the progress line (:class:`Progress`).

The report's keys are listed in ``docs/eval-dataset.md``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.eval_scoring import FIELDS, OUTCOMES


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _counts(tp: int, fp: int, fn: int) -> dict[str, Any]:
    return {
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def _score(rows: Sequence[dict[str, Any]], key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-field and micro-averaged precision/recall from the rows' ``key`` counts."""
    fields: dict[str, dict[str, Any]] = {}
    totals = [0, 0, 0]
    for name in FIELDS:
        tp = sum(r[key][name][0] for r in rows)
        pred = sum(r[key][name][1] for r in rows)
        true = sum(r[key][name][2] for r in rows)
        fields[name] = _counts(tp, pred - tp, true - tp)
        totals = [totals[0] + tp, totals[1] + pred - tp, totals[2] + true - tp]
    return fields, _counts(*totals)


def summarise(
    rows: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    *,
    wall_s: float | None = None,
    skipped: Sequence[dict[str, Any]] = (),
    ignored_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Aggregate per-invoice rows into the report (pure; the tests check it directly)."""
    n = len(rows)
    outcomes = Counter(r["outcome"] for r in rows)
    fields, micro = _score(rows, "fields")
    fields_before_cap, micro_before_cap = _score(rows, "fields_before_cap")
    confusion = {row: dict.fromkeys(OUTCOMES, 0) for row in ("acceptable", "unacceptable")}
    expected: dict[str, dict[str, int]] = {
        d: dict.fromkeys(OUTCOMES, 0) for d in ("SUCCEEDED", "REVIEW_REQUIRED")
    }
    for r in rows:
        confusion["acceptable" if r["acceptable"] else "unacceptable"][r["outcome"]] += 1
        if r["expected_decision"] is not None:
            expected[r["expected_decision"]][r["outcome"]] += 1
    judged = [r for r in rows if r["decision_right"] is not None]
    reviewed_for = Counter(code for r in rows for code in set(r["reasons"]))
    tokens = [r["completion_tokens"] for r in rows if r["completion_tokens"] is not None]
    latencies = sorted(r["latency_s"] for r in rows)
    return {
        **meta,
        "invoices": n,
        "succeeded": outcomes["SUCCEEDED"],
        "review_required": outcomes["REVIEW_REQUIRED"],
        "failed": outcomes["MALFORMED"] + outcomes["ENGINE_ERROR"],
        "malformed": outcomes["MALFORMED"],
        "engine_errors": outcomes["ENGINE_ERROR"],
        "false_accepts": [
            {"id": r["id"], "fields": r["differing_fields"], "expected": r["expected_decision"]}
            for r in rows
            if r["false_accept"]
        ],
        # Against expected_decision; MALFORMED and ENGINE_ERROR count as wrong.
        "decision_accuracy": _ratio(sum(1 for r in judged if r["decision_right"]), len(judged)),
        "decisions_judged": len(judged),
        "fields": fields,
        "micro": micro,
        # Also counting what truncated answers had written before the output cap.
        "fields_before_cap": fields_before_cap,
        "micro_before_cap": micro_before_cap,
        "exact_match": _ratio(sum(1 for r in rows if r["exact_match"]), n),
        "confusion": confusion,
        "decision_vs_expected": expected,
        "review_rate_by_reason": {
            code: _ratio(count, n) for code, count in reviewed_for.most_common()
        },
        "reason_counts": dict(Counter(c for r in rows for c in r["reasons"]).most_common()),
        "output_tokens_mean": round(statistics.fmean(tokens), 1) if tokens else None,
        "output_tokens_reported": len(tokens),
        "output_tokens_per_s": round(sum(tokens) / wall_s, 2) if tokens and wall_s else None,
        "invoices_per_minute": round(n / (wall_s / 60), 3) if wall_s and n else None,
        "wall_s": round(wall_s, 3) if wall_s is not None else None,
        "latency_s": {
            "mean": round(statistics.fmean(latencies), 4) if latencies else None,
            "p50": latencies[len(latencies) // 2] if latencies else None,
            "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
            if latencies
            else None,
            "max": latencies[-1] if latencies else None,
        },
        "skipped": list(skipped),
        "ignored_keys": list(ignored_keys),
        "rows": list(rows),
    }


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render_text(report: dict[str, Any], *, max_listed: int = 5) -> str:
    """One screen (at most ~40 lines) summarising the report."""
    lines = [
        f"fenceline eval: {report['invoices']} invoices from {report.get('source', '?')}"
        f" · engine {report.get('engine', '?')} · model {report.get('model', '?')}",
        f"decisions: {report['succeeded']} SUCCEEDED, {report['review_required']} "
        f"REVIEW_REQUIRED, {report['failed']} FAILED ({report['malformed']} malformed, "
        f"{report['engine_errors']} engine errors)",
        f"decision accuracy vs expected_decision: {_f(report['decision_accuracy'])} "
        f"({report['decisions_judged']} invoices with an expected decision)",
    ]
    fa = report["false_accepts"]
    lines.append(f"false accepts: {len(fa)}")
    for item in fa[:max_listed]:
        why = ", ".join(item["fields"]) or f"expected {item['expected']}"
        lines.append(f"  {item['id']}: {why}"[:100])
    if len(fa) > max_listed:
        lines.append(f"  ... and {len(fa) - max_listed} more (report.json)")
    micro = report["micro"]
    lines.append(
        f"fields (precision / recall; all: {_f(micro['precision'])} / {_f(micro['recall'])}):"
    )
    names = list(report["fields"])
    half = (len(names) + 1) // 2
    rights: list[str | None] = [*names[half:], None][:half]
    for left, right in zip(names[:half], rights, strict=True):
        cell = [
            f"{name:<24} {_f(report['fields'][name]['precision'])} / "
            f"{_f(report['fields'][name]['recall'])}"
            for name in (left, right)
            if name is not None
        ]
        lines.append("  " + "   ".join(f"{c:<40}" for c in cell).rstrip())
    rates = list(report["review_rate_by_reason"].items())
    lines.append("review rate by reason:" + ("" if rates else " none"))
    for code, rate in rates[:max_listed]:
        count = report["reason_counts"].get(code, 0)
        lines.append(f"  {code:<32} {_f(rate)} ({count} reason{'' if count == 1 else 's'})")
    if len(rates) > max_listed:
        lines.append(f"  ... and {len(rates) - max_listed} more codes")
    lines.append(
        f"output tokens per invoice: {_f(report['output_tokens_mean'], 1)} "
        f"({report['output_tokens_reported']} of {report['invoices']} reported)"
    )
    lines.append(
        f"throughput: {_f(report['invoices_per_minute'], 2)} invoices/min, "
        f"{_f(report['output_tokens_per_s'], 1)} output tokens/s over {_f(report['wall_s'], 1)} s"
    )
    skipped = report["skipped"]
    if skipped:
        lines.append(f"skipped lines: {len(skipped)}")
        for item in skipped[:3]:
            lines.append(f"  line {item['line']}: {item['error']}"[:100])
        if len(skipped) > 3:
            lines.append(f"  ... and {len(skipped) - 3} more (report.json)")
    if report["ignored_keys"]:
        lines.append(f"ignored top-level keys: {', '.join(report['ignored_keys'])}"[:100])
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    """Per-field precision/recall bars and the decision confusion matrix, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["fields"])
    precision = [report["fields"][f]["precision"] or 0.0 for f in names]
    recall = [report["fields"][f]["recall"] or 0.0 for f in names]
    fig, (bars, matrix) = plt.subplots(
        1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 1.3]}
    )
    xs = range(len(names))
    bars.bar([x - 0.2 for x in xs], precision, width=0.4, label="precision")
    bars.bar([x + 0.2 for x in xs], recall, width=0.4, label="recall")
    bars.set_xticks(list(xs), names, rotation=60, ha="right", fontsize=8)
    bars.set_ylim(0, 1.05)
    micro = report["micro"]
    scores = f"micro P={micro['precision']} R={micro['recall']}"
    bars.set_title(f"{report.get('model')} · n={report['invoices']} · {scores}")
    bars.legend(loc="lower right")
    rows = ["acceptable", "unacceptable"]
    cells = [[report["confusion"][r][c] for c in OUTCOMES] for r in rows]
    matrix.imshow(cells, cmap="Blues")
    matrix.set_xticks(range(len(OUTCOMES)), [c.replace("_", "\n") for c in OUTCOMES], fontsize=8)
    matrix.set_yticks(range(len(rows)), rows)
    for i, row in enumerate(cells):
        for j, value in enumerate(row):
            matrix.text(j, i, str(value), ha="center", va="center", color="black")
    matrix.set_title(f"decision (false accepts {len(report['false_accepts'])})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class Progress:
    """A plain-text progress line on stderr, updated per finished invoice.

    On a terminal the line is redrawn in place; otherwise one line per update,
    so logs and captured output keep every step.
    """

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self.outcomes: Counter[str] = Counter()
        self.tokens = 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        done = sum(self.outcomes.values())
        failed = self.outcomes["MALFORMED"] + self.outcomes["ENGINE_ERROR"]
        rate = self.tokens / elapsed if elapsed > 0 else 0.0
        return (
            f"eval: {done}/{self.total} · SUCCEEDED {self.outcomes['SUCCEEDED']} "
            f"REVIEW {self.outcomes['REVIEW_REQUIRED']} FAILED {failed} · "
            f"{elapsed:.0f} s · {rate:.1f} tok/s"
        )

    def update(self, row: dict[str, Any]) -> None:
        self.outcomes[row["outcome"]] += 1
        self.tokens += row["completion_tokens"] or 0
        if self.tty:
            self.stream.write("\r" + self.line())
            if sum(self.outcomes.values()) == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
