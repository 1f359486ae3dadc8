"""What a fuzzing run found, per transformation (and per decoy field): invoices, answers,
accepted, reviewed (with the reason codes and field paths behind each review, counted,
and the rule ids behind them and behind each value grounding changed),
false accepts with their one-sided 95 % upper bound, and examples of each false accept.

An invoice counts under every transformation of its family, and under the family
itself (``families``), so a combination that fails where its parts pass shows up.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.eval.bounds import false_accept_bound
from benchmarks.fuzz.campaign import Trial

#: False-accept examples kept in the JSON report (the text summary shows a few).
MAX_EXAMPLES = 200


def _tally(trials: list[Trial]) -> dict[str, Any]:
    accepted = sum(t.decision == "SUCCEEDED" for t in trials)
    wrong = [t for t in trials if t.false_accept]
    reasons: Counter[str] = Counter(r for t in trials for r in t.reasons)
    return {
        "invoices": len({(t.seed, t.family) for t in trials}),
        "answers": len(trials),
        "accepted": accepted,
        "acceptance_rate": round(accepted / len(trials), 4) if trials else None,
        "reviewed": sum(t.decision == "REVIEW_REQUIRED" for t in trials),
        "malformed": sum(t.decision == "MALFORMED" for t in trials),
        "false_accepts": len(wrong),
        "false_accept_bound": false_accept_bound(len(wrong), len(trials)),
        #: decoy runs: false accepts of the decoyed value itself
        "decoys_taken": sum(t.decoy_taken for t in trials),
        "false_accept_fields": dict(Counter(f for t in wrong for f in t.wrong).most_common()),
        "review_reasons": dict(reasons.most_common()),
        #: the rule ids behind the reviews, and those that changed a value
        "review_rules": dict(Counter(r for t in trials for r in t.rules).most_common()),
        "changes": dict(Counter(r for t in trials for r in t.changes).most_common()),
    }


def _example(t: Trial) -> dict[str, Any]:
    out: dict[str, Any] = {"seed": t.seed, "family": t.family, "wrong": t.wrong}
    if t.decoy_field is not None:
        out["decoy"] = {"field": t.decoy_field, "value": t.decoy_value}
    return out


def build(trials: list[Trial], **run: Any) -> dict[str, Any]:
    """The report of one run; ``run`` (mode, seeds, command...) is stored as given."""
    by_transform: dict[str, list[Trial]] = defaultdict(list)
    by_family: dict[str, list[Trial]] = defaultdict(list)
    by_field: dict[str, dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
    per_field: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        by_family[t.family].append(t)
        if t.decoy_field is not None:
            per_field[t.decoy_field].append(t)
        for name in t.transformations:
            by_transform[name].append(t)
            if t.decoy_field is not None:
                by_field[name][t.decoy_field].append(t)
    # the decoy's own value accepted first: those are what each decoy tests
    wrong = sorted((t for t in trials if t.false_accept), key=lambda t: not t.decoy_taken)
    return {
        **run,
        "overall": _tally(trials),
        "transformations": {name: _tally(ts) for name, ts in sorted(by_transform.items())},
        "families": {name: _tally(ts) for name, ts in sorted(by_family.items())},
        "decoy_fields_overall": {f: _tally(ts) for f, ts in sorted(per_field.items())},
        "decoy_fields": {
            name: {f: _tally(ts) for f, ts in sorted(fields.items())}
            for name, fields in sorted(by_field.items())
        },
        "false_accept_examples": [_example(t) for t in wrong[:MAX_EXAMPLES]],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _row(name: str, t: dict[str, Any]) -> str:
    top = ", ".join(f"{r} {n}" for r, n in list(t["review_reasons"].items())[:2])
    return (
        f"{name[:26]:<26} {t['invoices']:>5} {t['answers']:>6} {t['accepted']:>6} "
        f"{_pct(t['acceptance_rate']):>6} {t['reviewed']:>6} {t['false_accepts']:>5} "
        f"{_pct(t['false_accept_bound']):>6}  {top[:60]}"
    )


def summary(report: dict[str, Any]) -> str:
    """One screen: a row per transformation, the false-accept fields, a few examples."""
    head = (
        f"{'transformation':<26} {'inv':>5} {'answ':>6} {'acc':>6} {'acc%':>6} "
        f"{'review':>6} {'FA':>5} {'FA95':>6}  top review reasons"
    )
    lines = [
        f"fenceline fuzz --mode {report.get('mode')} (seeds {report.get('seeds')}, "
        f"{report.get('wall_s')} s)",
        head,
        *(_row(name, t) for name, t in report["transformations"].items()),
        _row("ALL", report["overall"]),
    ]
    for name, t in report.get("decoy_fields_overall", {}).items():
        lines.append(
            f"  decoy {name:<18} {t['answers']:>5} answers {t['accepted']:>5} accepted "
            f"{t['decoys_taken']:>5} with the decoy's value ({_pct(t['false_accept_bound'])} FA95)"
        )
    fields = report["overall"]["false_accept_fields"]
    if fields:
        lines.append("false accepts by field: " + ", ".join(f"{f} {n}" for f, n in fields.items()))
    for ex in report["false_accept_examples"][:6]:
        decoy = f" decoy {ex['decoy']['field']}={ex['decoy']['value']!r}" if "decoy" in ex else ""
        field, sides = next(iter(ex["wrong"].items()))
        lines.append(
            f"  seed {ex['seed']} {ex['family']}{decoy}: {field} truth {sides['truth'][:3]} "
            f"accepted {sides['got'][:3]}"
        )
    return "\n".join(lines)


def write(report: dict[str, Any], out_dir: Path, stem: str) -> tuple[Path, Path]:
    """``DIR/STEM.json`` and ``DIR/STEM.txt`` (the summary)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, text_path = out_dir / f"{stem}.json", out_dir / f"{stem}.txt"
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str) + "\n")
    text_path.write_text(summary(report) + "\n")
    return json_path, text_path


def export(lines: Iterable[dict[str, Any]], path: Path) -> int:
    """Write ``fenceline eval --dataset`` lines; returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    return n
