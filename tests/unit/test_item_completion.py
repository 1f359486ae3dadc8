"""Rows a small model left out or garbled, read by code only when arithmetic proves the
table whole (``pipeline.extraction.items``): measured over generated invoices with the
model's observed failures applied to a perfect answer."""

from __future__ import annotations

import random

import pytest

from benchmarks.invoices.generator import Variant, generate_invoice
from pipeline.extraction import answer_for
from pipeline.extraction.answer import ItemRef, dump_answer
from pipeline.worker import interpret
from tests.support.answers import every_item


def _strip(node: object) -> object:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "evidence"}
    if isinstance(node, list | tuple):
        return [_strip(v) for v in node]
    return node


def _outcome(seed: int, failure: str, variant: Variant = Variant.CLEAN) -> str | None:
    """'exact', 'review' or 'false_accept' for a perfect answer with one ``failure``
    applied at a row chosen by the seed; None for invoices with one row."""
    inv = generate_invoice(seed, variant, max_line_items=8)
    answer = every_item(
        answer_for(inv.truth if variant is Variant.CLEAN else inv.candidate, inv.ocr_text),
        inv.ocr_text,
    )
    items = list(answer.items or ())
    if len(items) < 2:
        return None
    r = random.Random(seed).randrange(1, len(items))
    if failure == "skipped_and_neighbour_repeated":  # what SmolLM2 does past a few rows
        items[r] = ItemRef(items[r].line, items[r - 1].description)
    else:  # "skipped"
        del items[r]
    out = interpret(
        dump_answer(answer.model_copy(update={"items": tuple(items)})),
        inv.ocr_text,
        inv.master_data,
        today=inv.today,
    )
    if out.report.reasons:
        return "review"
    got = _strip(out.extraction.model_dump(exclude={"uncertain_fields"}))
    want = _strip(inv.truth.model_dump(exclude={"uncertain_fields"}))
    return "exact" if got == want else "false_accept"


@pytest.mark.parametrize("failure", ["skipped_and_neighbour_repeated", "skipped"])
def test_a_skipped_row_is_read_by_code_and_never_wrongly(failure: str) -> None:
    outcomes = [o for seed in range(5000, 5080) if (o := _outcome(seed, failure)) is not None]
    assert "false_accept" not in outcomes
    # Before the arithmetic completion 0-7 % of these succeeded; 72-76 % after (51 and
    # 54 of 71); 87-90 % (62 and 64) once stacked rows are read from their description
    # line, so that their missing rows can be read too.
    assert outcomes.count("exact") >= 0.85 * len(outcomes), outcomes.count("exact")


def test_a_stacked_table_with_a_row_left_out_is_read_whole() -> None:
    """Seed 9225, "1. Software licence, annual" over "2 pcs x 1,636.69 = 3,273.38 (Tax
    20%)": the number line reads as a row alone, and its only cells, "x" and "(Tax",
    named no missing description, so every stacked invoice with a row left out went to
    review (55 of 55 of seeds 5000-5399). The row is now read from its description."""
    inv = generate_invoice(9225, max_line_items=3)
    assert inv.layout == "stacked"
    answer = every_item(answer_for(inv.truth, inv.ocr_text), inv.ocr_text)
    assert answer.items is not None
    for gone in range(len(answer.items)):
        items = answer.items[:gone] + answer.items[gone + 1 :]
        out = interpret(
            dump_answer(answer.model_copy(update={"items": items})),
            inv.ocr_text,
            inv.master_data,
            today=inv.today,
        )
        assert not out.report.reasons, out.report.reasons
        got = [(i.description, i.line_amount) for i in out.extraction.line_items]
        assert got == [(t.description, t.line_amount) for t in inv.truth.line_items]


@pytest.mark.parametrize(
    "variant",
    [Variant.ARITHMETIC_OFF_BY_CENT, Variant.HOMOGLYPH_SUPPLIER, Variant.FABRICATED_EVIDENCE],
)
def test_an_adversarial_invoice_with_a_skipped_row_still_goes_to_review(variant: Variant) -> None:
    outcomes = {_outcome(seed, "skipped", variant) for seed in range(5000, 5030)} - {None}
    assert outcomes == {"review"}
