"""The metamorphic layout fuzzer (issue 41): its transformations keep the truth locatable,
its truth of an untouched invoice gives the generator's perfect answer, and the
property SUCCEEDED ⇒ every field equals the truth holds for perfect answers.

The property test is the acceptance test of issue 41's grounding work: it fails while
any transformation lets a wrong value through (e.g. quantity and unit price swapped
where a table prints the price first).
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from benchmarks.eval.dataset import parse_line
from benchmarks.fuzz.answers import decoys, perfect
from benchmarks.fuzz.campaign import Trial, families, judge, run
from benchmarks.fuzz.cases import fuzz_case
from benchmarks.fuzz.command import main
from benchmarks.fuzz.facts import facts_of
from benchmarks.fuzz.report import build
from benchmarks.fuzz.transforms import (
    COLUMN_ORDERS,
    FAMILY_NAMES,
    TRANSFORMS,
    apply_family,
    compatible,
    draw_family,
)
from benchmarks.fuzz.vocabulary import WORDS
from benchmarks.invoices import generate_invoice
from pipeline.extraction.extractor import answer_for
from pipeline.invoice import RULES, Evidence, Extraction

NAMES = [t.name for t in TRANSFORMS]


def _evidence(truth: Extraction) -> list[tuple[str, Evidence]]:
    out: list[tuple[str, Evidence]] = []
    for name in ("invoice_number", "issue_date", "due_date", "currency", "net_total",
                 "tax_total", "gross_total", "iban"):  # fmt: skip
        node = getattr(truth, name)
        if node is not None:
            out.append((name, node.evidence))
    for node, name in ((truth.supplier.name, "supplier"), (truth.supplier.vat_id, "vat_id")):
        assert node is not None
        out.append((name, node.evidence))
    out += [(f"line_items[{i}]", x.evidence) for i, x in enumerate(truth.line_items)]
    out += [(f"tax_lines[{i}]", x.evidence) for i, x in enumerate(truth.tax_lines)]
    return out


def _assert_locatable(text: str, truth: Extraction) -> None:
    pages = text.split("\f")
    for name, ev in _evidence(truth):
        assert pages[ev.page - 1][ev.start : ev.end] == ev.quote, name
        assert ev.quote.strip(), name


@pytest.mark.parametrize("name", ["plain", *NAMES])
def test_each_transformation_keeps_the_truth_locatable(name: str) -> None:
    for seed in range(12):
        case = fuzz_case(seed, (name,))
        _assert_locatable(case.text, case.truth)
        truth = case.truth
        assert truth.invoice_number is not None and truth.gross_total is not None
        assert truth.invoice_number.evidence.quote == truth.invoice_number.value
        # every printed row shows its own amount
        for item in truth.line_items:
            assert item.description in item.evidence.quote


def test_combined_families_keep_the_truth_locatable() -> None:
    for seed in range(40):
        family = draw_family(random.Random(seed), NAMES[seed % len(NAMES)], 3)
        assert compatible(family)
        case = fuzz_case(seed, family)
        _assert_locatable(case.text, case.truth)


def test_the_truth_changes_with_the_print() -> None:
    """An invoice number rewritten is the new truth; a due date removed is null."""
    spaced = fuzz_case(7, ("number_spaced",)).truth.invoice_number
    assert spaced is not None and any(ch in spaced.value for ch in " /")
    assert fuzz_case(7, ("no_due_date",)).truth.due_date is None
    term = fuzz_case(7, ("due_term",))
    base = generate_invoice(7, max_line_items=8).truth
    if facts_of(generate_invoice(7, max_line_items=8)).term_days is not None:
        assert term.truth.due_date is not None and base.due_date is not None
        assert term.truth.due_date.value == base.due_date.value


def test_every_column_order_is_reachable_and_rendered() -> None:
    assert len(set(COLUMN_ORDERS)) == 120
    facts = facts_of(generate_invoice(3, max_line_items=4))
    seen = set()
    for i in range(2000):
        _, layout = apply_family(facts, ("columns",), random.Random(i))
        seen.add(layout.columns)
    assert len(seen) == 120


def test_the_untouched_invoice_has_the_generators_perfect_answer() -> None:
    """The fuzzer's located truth of the generator's own text answers as the generator's
    truth does (the check of the truth-building path on untransformed invoices)."""
    for seed in range(60):
        invoice = generate_invoice(seed, max_line_items=8)
        case = fuzz_case(seed, ("generator",))
        _assert_locatable(case.text, case.truth)
        assert perfect(case) == answer_for(invoice.truth, invoice.ocr_text)


def test_vocabulary_is_complete_for_every_language() -> None:
    keys = set(WORDS["en"])
    for language, words in WORDS.items():
        assert set(words) == keys, language
        assert len(str(words["months"]).split()) == 12 and len(words["headers"]) == 6 == len(
            words["abbr"]
        )


def test_decoys_change_one_field_to_a_candidate_of_the_grammar() -> None:
    case = fuzz_case(3, ("letter",))
    right = json.loads(perfect(case))
    found = decoys(case, k=2)
    assert found and Counter(d.field for d in found).most_common(1)[0][1] <= 2
    for d in found:
        changed = {k for k, v in json.loads(d.answer).items() if right.get(k) != v}
        assert len(changed) == 1


def test_a_false_accept_is_a_succeeded_answer_with_a_wrong_field() -> None:
    case = fuzz_case(5, ("plain",))
    ok = judge(case, perfect(case), "perfect")
    assert ok.decision == "SUCCEEDED" and not ok.wrong and not ok.false_accept
    wrong = Trial(5, "plain", "perfect", "SUCCEEDED", (), {"invoice_number": {}})
    assert wrong.false_accept


def test_the_report_names_the_rule_ids_behind_each_review() -> None:
    case = fuzz_case(3, ("letter",))
    trials = [judge(case, d.answer, "decoy", (d.field, d.value)) for d in decoys(case, k=1)]
    reviewed = [t for t in trials if t.decision == "REVIEW_REQUIRED"]
    assert reviewed and all(t.rules and set(t.rules) <= set(RULES) for t in reviewed)
    counted = build(trials)["overall"]["review_rules"]
    assert counted == dict(Counter(r for t in trials for r in t.rules).most_common())


def test_export_writes_eval_dataset_lines_with_their_family(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fuzz.jsonl"
    code = main(["--seeds", "0-3", "--transform", "letter+noise,items_email", "--quiet",
                 "--out", str(tmp_path), "--export", str(out)])  # fmt: skip
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and code in (0, 1)
    for line in lines:
        record, extra = parse_line(line)
        assert extra == [] and json.loads(line)["family"] in ("letter+noise", "items_email")
        assert record.expected_decision == "SUCCEEDED"
    assert list(tmp_path.glob("fuzz-perfect-0-3.json"))


def test_perfect_answers_are_never_false_accepts() -> None:
    """The property over 400 transformed invoices (each transformation alone and in
    combinations of up to three), perfect answers: SUCCEEDED ⇒ every field right."""
    pool = [(name,) for name in FAMILY_NAMES]
    pairs = list(families(range(2000, 2240), pool))
    pairs += list(families(range(3000, 3160), [(n,) for n in NAMES], combine=2))
    trials = run(pairs, "perfect", progress=False)
    assert len(trials) == 400
    wrong = [t for t in trials if t.false_accept]
    by_transform = Counter(name for t in wrong for name in t.transformations)
    examples = [(t.seed, t.family, sorted(t.wrong)) for t in wrong[:5]]
    assert not wrong, f"{len(wrong)} false accepts of 400: {dict(by_transform)}; e.g. {examples}"


def test_fenceline_fuzz_is_a_benchmarks_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.cli import register
    from cluster.cli.base import Subcommands
    from pipeline.settings import Settings

    subs = Subcommands()
    register(subs)
    fuzz = subs.passthrough("fuzz")
    assert fuzz is not None
    argv = ["--seeds", "1", "--transform", "plain", "--quiet", "--out", str(tmp_path)]
    assert fuzz(argv, Settings()) == 0
    with pytest.raises(SystemExit):
        fuzz(["--transform", "due_term+no_due_date"], Settings())  # both set the due date
