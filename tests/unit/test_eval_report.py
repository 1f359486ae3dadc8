"""The report's false accepts per family with their bound, and the reasons behind reviews.

Rows are written by hand (the keys :func:`benchmarks.eval.scoring.evaluate_one` gives a
row), so every count, group and bound below is known in advance.
"""

from __future__ import annotations

from typing import Any

from benchmarks.eval.bounds import false_accept_bound
from benchmarks.eval.report import by_family, reason_field_counts, render_text, summarise
from benchmarks.eval.scoring import FIELDS


def _row(
    id: str,
    outcome: str,
    *,
    right: bool = True,
    reasons: tuple[tuple[str, str], ...] = (),
    **tags: str,
) -> dict[str, Any]:
    counts = {name: [1, 1, 1] for name in FIELDS}
    succeeded = outcome == "SUCCEEDED"
    return {
        "id": id,
        **tags,
        "outcome": outcome,
        "reasons": [code for code, _ in reasons],
        "reason_details": [{"code": c, "field": f, "detail": ""} for c, f in reasons],
        "rules": [f"rule.{code}" for code, _ in reasons],
        "fields": counts,
        "fields_before_cap": counts,
        "latency_s": 0.1,
        "completion_tokens": 10,
        "expected_decision": None,
        "decision_right": None,
        "differing_fields": [] if right else ["invoice_number"],
        "exact_match": right and outcome in ("SUCCEEDED", "REVIEW_REQUIRED"),
        "acceptable": right,
        "false_accept": succeeded and not right,
    }


ROWS = [
    _row("a", "SUCCEEDED", right=False, family="swap_columns+noise_year"),
    _row("b", "SUCCEEDED", family="swap_columns"),
    _row(
        "c",
        "REVIEW_REQUIRED",
        family="swap_columns",
        reasons=(
            ("ungrounded_value", "line_items[2].quantity"),
            ("ungrounded_value", "line_items[0].quantity"),
            ("missing_field", "due_date"),
        ),
    ),
    _row("d", "MALFORMED", right=False, family="noise_year"),
]


def test_false_accepts_are_counted_per_family_and_per_transformation_with_their_bound() -> None:
    groups = by_family(ROWS)
    assert list(groups) == ["family", "transformation"]
    assert groups["family"]["swap_columns"] == {
        "invoices": 2,
        "succeeded": 1,
        "succeeded_right": 1,
        "review_required": 1,
        "failed": 0,
        "false_accepts": 0,
        "false_accept_rate": 0.0,
        "false_accept_upper_95": false_accept_bound(0, 2),
        "reason_counts": {"ungrounded_value": 2, "missing_field": 1},
        "rule_counts": {"rule.ungrounded_value": 2, "rule.missing_field": 1},
    }
    # A combination counts in its family and once in each transformation it combines.
    swap, noise = groups["transformation"]["swap_columns"], groups["transformation"]["noise_year"]
    assert (swap["invoices"], swap["false_accepts"], swap["succeeded"]) == (3, 1, 2)
    assert swap["false_accept_upper_95"] == false_accept_bound(1, 3)
    assert (noise["invoices"], noise["false_accepts"], noise["failed"]) == (2, 1, 1)
    assert groups["family"]["swap_columns+noise_year"]["false_accept_upper_95"] == 1.0


def test_the_report_bounds_the_overall_rate_and_counts_reasons_by_code_and_field() -> None:
    report = summarise(ROWS, {})
    assert report["false_accept_rate"] == 0.25 and report["succeeded_right"] == 1
    assert report["false_accept_upper_95"] == false_accept_bound(1, 4)
    assert report["false_accepts"] == [
        {"id": "a", "fields": ["invoice_number"], "expected": None,
         "family": "swap_columns+noise_year"}
    ]  # fmt: skip
    # Row numbers dropped: one rule over two rows is two reasons on one path.
    assert report["reason_field_counts"] == {
        "ungrounded_value": {"line_items[].quantity": 2},
        "missing_field": {"due_date": 1},
    }
    assert reason_field_counts([_row("x", "REVIEW_REQUIRED", reasons=(("bidi_control", ""),))]) == {
        "bidi_control": {"-": 1}
    }


def test_the_text_shows_where_wrong_invoices_were_accepted_first() -> None:
    text = render_text(summarise(ROWS, {"source": "fuzzer"}))
    lines = text.splitlines()
    upper = false_accept_bound(1, 4)
    assert upper is not None
    bound = f"{100 * upper:.3g} %"
    assert f"false accepts: 1 (1/4 = 25 %, 95 % bound {bound})" in lines
    assert "  a [swap_columns+noise_year]: invoice_number" in lines
    assert "decisions: 2 SUCCEEDED (1 with every field right), 1 REVIEW_REQUIRED" in text
    head = lines.index(next(x for x in lines if x.startswith("by family")))
    table = [x.split()[0] for x in lines[head + 2 : head + 7]]
    assert table == [
        "family=swap_columns+noise_year",  # 1/1
        "transformation=noise_year",  # 1/2
        "transformation=swap_columns",  # 1/3
        "family=swap_columns",
        "family=noise_year",
    ]
    assert lines[head + 2].split()[1:6] == ["1", "1", "0", "0", "0"]
    assert lines[head + 2].endswith("1/1 = 100 %, 95 % bound 100 %")
    reasons = next(x for x in lines if x.lstrip().startswith("ungrounded_value"))
    assert reasons.split() == ["ungrounded_value", "0.250", "2", "line_items[].quantity", "2"]


def test_generated_invoices_group_by_layout_language_and_variant_within_one_screen() -> None:
    rows = [
        _row(
            f"gen-{i}",
            "SUCCEEDED" if i % 4 else "REVIEW_REQUIRED",
            right=i != 9,
            reasons=() if i % 4 else (("supplier_unknown", "supplier.name"),),
            layout=("table", "prose", "ledger")[i % 3],
            language=("en", "de", "fr", "es", "it", "nl", "pt", "pl", "sv", "da")[i % 10],
            variant="clean",
        )
        for i in range(40)
    ]
    report = summarise(rows, {})
    assert list(report["by_family"]) == ["layout", "language", "variant"]
    assert report["by_family"]["layout"]["table"]["false_accepts"] == 1  # gen-9: 9 % 3 == 0
    assert report["by_family"]["language"]["da"]["false_accepts"] == 1
    lines = render_text(report, max_groups=4).splitlines()
    head = lines.index(next(x for x in lines if x.startswith("by family")))
    # 1/4, 1/14 and 1/40 first; then the largest group without one (13, by name).
    assert [x.split()[0] for x in lines[head + 2 : head + 6]] == [
        "language=da", "layout=table", "variant=clean", "layout=ledger"
    ]  # fmt: skip
    assert lines[head + 6] == "  ... and 10 more groups, none with a false accept (report.json)"
    assert len(render_text(report).splitlines()) <= 50


def test_transformations_equal_to_families_are_not_shown_twice() -> None:
    rows = [
        _row("a", "SUCCEEDED", family="swap"),
        _row("b", "SUCCEEDED", family="noise"),
        _row("c", "SUCCEEDED", family="noise+split"),
    ]
    report = summarise(rows, {})
    assert set(report["by_family"]["transformation"]) == {"swap", "noise", "split"}  # JSON: all
    labels = [x.split()[0] for x in render_text(report).splitlines() if x.startswith("  ")]
    assert "family=swap" in labels and "transformation=swap" not in labels
    # "noise" alone (1 invoice) and in a combination (2 invoices) are two groups.
    assert {"family=noise", "transformation=noise", "transformation=split"} <= set(labels)
