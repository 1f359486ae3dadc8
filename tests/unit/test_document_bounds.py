"""Bounded work per document at the extraction's edge: limits, the CPU budget, and the
two quadratic readings made linear (issue 41 item 6)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.invoices import Variant, generate_invoice
from pipeline.cpu_budget import cpu_budget, spend
from pipeline.errors import DocumentOverLimit, ExtractionBudgetExceeded, TerminalError
from pipeline.extraction.bounds import DEFAULT_LIMITS, DocumentLimits, measure, over_limit
from pipeline.extraction.extractor import answer_for, prepare_call
from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import LABEL_WIDTH, Found, fold, label_before
from pipeline.settings import Settings
from pipeline.worker import interpret

ONE_MB = "12,50 Widget 3 x 4,17 am 01.02.2024 " * (1_000_000 // 36)
LINE = ("Zahlbar bis 01.02.2024, Rechnung 2024/17, 19 % MwSt 12,50 EUR. " * 1600)[:100_000]


@pytest.fixture(scope="module")
def invoice() -> object:
    inv = generate_invoice(3, Variant.CLEAN)
    prepare_call(inv.ocr_text)  # process-wide caches (CLDR month names) filled once
    return inv


def _cpu(fn: object) -> tuple[object, float]:
    started = time.process_time()
    try:
        out: object = fn()  # type: ignore[operator]
    except TerminalError as exc:
        out = exc
    return out, time.process_time() - started


@pytest.mark.parametrize("huge", [ONE_MB, LINE], ids=["1 MB single line", "100,000-char line"])
def test_a_huge_line_is_refused_within_2_s_of_cpu(invoice: object, huge: str) -> None:
    text = invoice.ocr_text + "\n" + huge  # type: ignore[attr-defined]
    out, cpu = _cpu(lambda: prepare_call(text))
    assert isinstance(out, DocumentOverLimit) and cpu < 2.0
    answer = answer_for(invoice.truth, invoice.ocr_text)  # type: ignore[attr-defined]
    out, cpu = _cpu(
        lambda: interpret(answer, text, invoice.master_data, today=invoice.today)  # type: ignore[attr-defined]
    )
    assert isinstance(out, DocumentOverLimit) and cpu < 2.0
    assert out.limit == ("document_bytes" if huge is ONE_MB else "line_chars")


@pytest.mark.parametrize("huge", [ONE_MB, LINE], ids=["1 MB single line", "100,000-char line"])
def test_past_the_limits_reading_settles_or_spends_its_budget_within_2_s(
    invoice: object, huge: str
) -> None:
    """Limits loose enough to let it in: the reading itself is bounded (the budget)."""
    text = invoice.ocr_text + "\n" + huge  # type: ignore[attr-defined]
    loose = DocumentLimits(10 << 20, 10 << 20, 10_000, 10 << 20, cpu_seconds=1.0)
    answer = answer_for(invoice.truth, invoice.ocr_text)  # type: ignore[attr-defined]
    for work in (
        lambda: prepare_call(text, limits=loose),
        lambda: interpret(answer, text, invoice.master_data, today=invoice.today, limits=loose),  # type: ignore[attr-defined]
    ):
        out, cpu = _cpu(work)
        assert cpu < 2.0
        assert not isinstance(out, TerminalError) or isinstance(out, ExtractionBudgetExceeded)


def test_a_100000_character_line_is_read_unbounded_in_under_2_s(invoice: object) -> None:
    """Labels were folded from the line's start once per value on it: 14 s of CPU."""
    text = invoice.ocr_text + "\n" + LINE  # type: ignore[attr-defined]
    answer = answer_for(invoice.truth, invoice.ocr_text)  # type: ignore[attr-defined]
    _, cpu = _cpu(lambda: prepare_call(text, limits=None))
    assert cpu < 2.0
    outcome, cpu = _cpu(
        lambda: interpret(answer, text, invoice.master_data, today=invoice.today, limits=None)  # type: ignore[attr-defined]
    )
    assert cpu < 2.0
    assert not isinstance(outcome, TerminalError)


def test_the_defaults_are_the_settings_and_pass_every_generated_shape() -> None:
    assert DocumentLimits.from_settings(Settings()) == DEFAULT_LIMITS
    for seed, layout in enumerate(("table", "stacked", "prose", "ledger", "columns", "keyvalue")):
        inv = generate_invoice(seed, Variant.PROMPT_INJECTION, line_items=200, layouts=(layout,))
        assert over_limit(inv.ocr_text, DEFAULT_LIMITS) is None


def test_each_limit_is_named_with_its_value_and_the_documents() -> None:
    limits = DocumentLimits(max_bytes=100, max_tokens=20, max_lines=3, max_line_chars=5)
    cases = {
        "x" * 101: ("document_bytes", 100, 101, None),
        "x\n" * 41: ("document_tokens", 20, 21, None),
        "a\nb\fc\nd": ("lines", 3, 4, None),
        "abc\nabcdef\fab": ("line_chars", 5, 6, 2),
    }
    for text, named in cases.items():
        refusal = over_limit(text, limits)
        assert refusal is not None
        assert (refusal.limit, refusal.allowed, refusal.actual, refusal.line) == named
    assert over_limit("abcde\f\nab", limits) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \n\f\r", max_size=40))
def test_shape_counts_lines_as_the_document_numbers_them(text: str) -> None:
    shape = measure(text)
    lines = Layout.read(text).lines
    assert shape.lines == len(lines)
    assert shape.longest_line == max(len(line.text) for line in lines)
    assert len(lines[shape.longest_at - 1].text) == shape.longest_line


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \t\u00a0\ufb03É:.1", max_size=400))
def test_the_label_before_a_value_is_the_end_of_the_whole_line_folded(prefix: str) -> None:
    line = Layout.read(prefix + "2024-01-02").lines[0]
    found = Found(1, len(prefix), len(line.text), line, "exact")
    assert label_before(found) == fold(prefix)[-LABEL_WIDTH:]


def test_a_spent_budget_raises_by_name_and_an_inner_budget_never_outlasts_the_outer() -> None:
    spend()  # no budget running: nothing to spend
    with cpu_budget(None, "unbounded"):
        spend()
    with pytest.raises(ExtractionBudgetExceeded, match="outer spent more than 1e-09 s"):
        with cpu_budget(1e-9, "outer"), cpu_budget(60.0, "inner"):
            time.sleep(0)
            sum(range(10_000))
            spend()
