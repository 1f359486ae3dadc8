"""The evaluation report: rows aggregated (:func:`summarise`), one screen of text
(:func:`render_text`), a PNG (:func:`plot`) and the progress line (:class:`Progress`).

Every false-accept count is reported with its one-sided 95 % Clopper-Pearson upper
bound (:func:`benchmarks.eval.bounds.false_accept_bound`), overall and per family
(:func:`by_family`), so a small sample cannot pass for a proof; every review is
counted by the reason code and the field path behind it. The report's keys are
listed in ``docs/eval-dataset.md``.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.eval.bounds import false_accept_bound
from benchmarks.eval.scoring import FIELDS, OUTCOMES, V3_SCORED_FIELDS

#: How rows are grouped, in report order: the dataset's ``family`` (a fuzzer's
#: transformations joined by "+"), each of those transformations alone, and a
#: generated invoice's layout, language and variant.
DIMENSIONS = ("family", "transformation", "layout", "language", "variant")


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


def _succeeded_right(rows: Sequence[dict[str, Any]]) -> int:
    return sum(1 for r in rows if r["outcome"] == "SUCCEEDED" and r["exact_match"])


def _tally(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Decisions and false accepts (with their bound) of one group of invoices."""
    n = len(rows)
    outcomes = Counter(r["outcome"] for r in rows)
    k = sum(1 for r in rows if r["false_accept"])
    return {
        "invoices": n,
        "succeeded": outcomes["SUCCEEDED"],
        "succeeded_right": _succeeded_right(rows),
        "review_required": outcomes["REVIEW_REQUIRED"],
        "failed": outcomes["MALFORMED"] + outcomes["ENGINE_ERROR"],
        "false_accepts": k,
        "false_accept_rate": _ratio(k, n),
        "false_accept_upper_95": false_accept_bound(k, n),
        "reason_counts": dict(Counter(c for r in rows for c in r["reasons"]).most_common()),
        # the rule ids behind the group's reviews: which rule to read (or retire) per family
        "rule_counts": dict(Counter(x for r in rows for x in r.get("rules", ())).most_common()),
    }


def _groups(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(dimension, name)`` groups a row counts in (see :data:`DIMENSIONS`)."""
    out: list[tuple[str, str]] = []
    family = row.get("family")
    if family:
        out.append(("family", str(family)))
        out += [("transformation", name) for name in sorted(set(str(family).split("+")))]
    out += [(dim, str(row[dim])) for dim in DIMENSIONS[2:] if row.get(dim)]
    return out


def by_family(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{dimension: {name: tally}}``, largest group first; dimensions no row has are absent.

    A fuzzed invoice counts once in its family and once in each transformation it
    combines, so a transformation's false accepts are those of every family it is in.
    """
    members: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        for dim, name in _groups(row):
            members.setdefault(dim, {}).setdefault(name, []).append(row)
    return {
        dim: {
            name: _tally(group)
            for name, group in sorted(members[dim].items(), key=lambda kv: (-len(kv[1]), kv[0]))
        }
        for dim in DIMENSIONS
        if dim in members
    }


def _path(field: str) -> str:
    """A reason's field path with row numbers dropped: ``line_items[3].quantity`` ->
    ``line_items[].quantity``, so one rule on many rows is one count per row."""
    return re.sub(r"\[[0-9]+\]", "[]", field) or "-"


def reason_field_counts(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{code: {field path: reasons}}``, the most frequent code and path first."""
    pairs = Counter(
        (d["code"], _path(d["field"])) for r in rows for d in r.get("reason_details", ())
    )
    codes = Counter(code for code, _ in pairs.elements())
    return {
        code: {
            path: count
            for (c, path), count in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0][1]))
            if c == code
        }
        for code, _ in codes.most_common()
    }


def rule_counts(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """How often each rule id gave a review reason (``rule_counts``) and changed a value
    (``change_counts``): what each rule of :data:`pipeline.invoice.rules.RULES` earns
    on the dataset."""
    return {
        "rule_counts": dict(Counter(x for r in rows for x in r.get("rules", ())).most_common()),
        "change_counts": dict(Counter(x for r in rows for x in r.get("changes", ())).most_common()),
    }


def _score(rows: Sequence[dict[str, Any]], key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-field and micro-averaged precision/recall from the rows' ``key`` counts.

    Contract v3's fields are listed only where a truth or an extraction stated one, so
    a dataset without them reports as before."""
    fields: dict[str, dict[str, Any]] = {}
    totals = [0, 0, 0]
    for name in FIELDS:
        tp = sum(r[key][name][0] for r in rows)
        pred = sum(r[key][name][1] for r in rows)
        true = sum(r[key][name][2] for r in rows)
        if name in V3_SCORED_FIELDS and pred == true == 0:
            continue
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
    k = sum(1 for r in rows if r["false_accept"])
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
        "succeeded_right": _succeeded_right(rows),
        "false_accepts": [
            {
                "id": r["id"],
                "fields": r["differing_fields"],
                "expected": r["expected_decision"],
                **{dim: r[dim] for dim in DIMENSIONS if r.get(dim)},
            }
            for r in rows
            if r["false_accept"]
        ],
        "false_accept_rate": _ratio(k, n),
        "false_accept_upper_95": false_accept_bound(k, n),
        "by_family": by_family(rows),
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
        "reason_field_counts": reason_field_counts(rows),
        **rule_counts(rows),
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


def _pct(value: float | None) -> str:
    """A share as a percentage with three significant digits (0.000599 -> 0.0599 %)."""
    return "n/a" if value is None else f"{100 * value:.3g} %"


def _false_accepts(k: int, n: int, bound: float | None) -> str:
    return f"{k}/{n} = {_pct(k / n if n else None)}, 95 % bound {_pct(bound)}"


def _family_table(report: dict[str, Any], max_groups: int) -> list[str]:
    """The groups with false accepts first (most first), then the others in report order."""
    families = report.get("by_family") or {}
    if not families:
        return []
    named = families.get("family", {})
    groups = [
        (f"{dim}={name}", t)
        for dim, members in families.items()
        for name, t in members.items()
        # A transformation no combination holds is its family again: the same rows twice.
        if not (dim == "transformation" and named.get(name, {}).get("invoices") == t["invoices"])
    ]

    def rank(i: int) -> tuple[bool, int, float]:
        t = groups[i][1]
        return (t["false_accepts"] == 0, -t["false_accepts"], -(t["false_accept_rate"] or 0.0))

    order = sorted(range(len(groups)), key=rank)  # stable: the rest keep report order
    shown = [groups[i] for i in order[:max_groups]]
    lines = [
        "by family (false accepts first; right = SUCCEEDED with every field right):",
        f"  {'group':<30} {'invoices':>8} {'SUCC':>5} {'right':>5} {'REVIEW':>6} {'failed':>6}"
        "  false accepts",
    ]
    for label, t in shown:
        name = label if len(label) <= 30 else label[:29] + "…"
        lines.append(
            f"  {name:<30} {t['invoices']:>8} {t['succeeded']:>5} {t['succeeded_right']:>5} "
            f"{t['review_required']:>6} {t['failed']:>6}  "
            + _false_accepts(t["false_accepts"], t["invoices"], t["false_accept_upper_95"])
        )
    hidden = [groups[i][1] for i in order[max_groups:]]
    if hidden:
        with_fa = sum(1 for t in hidden if t["false_accepts"])
        what = f"{with_fa} with false accepts" if with_fa else "none with a false accept"
        lines.append(f"  ... and {len(hidden)} more groups, {what} (report.json)")
    return lines


def _reason_lines(report: dict[str, Any], max_listed: int) -> list[str]:
    rates = list(report["review_rate_by_reason"].items())
    paths = report.get("reason_field_counts") or {}
    lines = [
        "review reasons (share of invoices, reasons, field paths):" + ("" if rates else " none")
    ]
    for code, rate in rates[:max_listed]:
        count = report["reason_counts"].get(code, 0)
        where = ", ".join(f"{path} {n}" for path, n in (paths.get(code) or {}).items())
        lines.append(f"  {code:<26} {_f(rate)} {count:>5}  {where}".rstrip()[:100])
    if len(rates) > max_listed:
        lines.append(f"  ... and {len(rates) - max_listed} more codes (report.json)")
    for key, what in (("rule_counts", "review rules"), ("change_counts", "changing rules")):
        counted = list((report.get(key) or {}).items())
        if counted:
            shown = ", ".join(f"{rule} {n}" for rule, n in counted[:max_listed])
            lines.append(f"{what}: {shown}"[:100])
    return lines


def render_text(report: dict[str, Any], *, max_listed: int = 5, max_groups: int = 10) -> str:
    """One screen (at most about 50 lines) summarising the report: where wrong invoices
    were accepted (overall and per family, each count with its 95 % upper bound) and
    which reasons sent the others to review."""
    n = report["invoices"]
    lines = [
        f"fenceline eval: {n} invoices from {report.get('source', '?')}"
        f" · engine {report.get('engine', '?')} · model {report.get('model', '?')}",
        f"decisions: {report['succeeded']} SUCCEEDED ({report.get('succeeded_right', '?')} with "
        f"every field right), {report['review_required']} REVIEW_REQUIRED, "
        f"{report['failed']} FAILED ({report['malformed']} malformed, "
        f"{report['engine_errors']} engine errors)",
        f"decision accuracy vs expected_decision: {_f(report['decision_accuracy'])} "
        f"({report['decisions_judged']} invoices with an expected decision)",
    ]
    fa = report["false_accepts"]
    bound = report.get("false_accept_upper_95")
    lines.append(f"false accepts: {len(fa)} ({_false_accepts(len(fa), n, bound)})")
    for item in fa[:max_listed]:
        why = ", ".join(item["fields"]) or f"expected {item['expected']}"
        where = "/".join(str(item[d]) for d in ("family", "layout", "language") if item.get(d))
        tag = f" [{where}]" if where else ""
        lines.append(f"  {item['id']}{tag}: {why}"[:100])
    if len(fa) > max_listed:
        lines.append(f"  ... and {len(fa) - max_listed} more (report.json)")
    lines += _family_table(report, max_groups)
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
    lines += _reason_lines(report, max_listed)
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
    fa = len(report["false_accepts"])
    matrix.set_title(
        f"decision (false accepts {fa}, 95 % bound {_pct(report.get('false_accept_upper_95'))})"
    )
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
