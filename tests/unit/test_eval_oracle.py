"""The oracle engine answers with the truth as the grammar lets a model write it."""

from __future__ import annotations

import asyncio
import json

from benchmarks.eval.generated import generated_cases
from benchmarks.eval.oracle import oracle_answer, oracle_extract
from benchmarks.eval.scoring import evaluate_one
from benchmarks.invoices.generator import Variant, generate_invoice
from pipeline.extraction import prepare_call


def test_the_oracle_gets_every_generated_invoice_right() -> None:
    invoices = [generate_invoice(seed, Variant.CLEAN, max_line_items=8) for seed in range(40, 64)]
    cases = generated_cases(invoices)
    extract = oracle_extract(cases)
    rows = [asyncio.run(evaluate_one(case, extract)) for case in cases]
    assert [r["outcome"] for r in rows] == ["SUCCEEDED"] * len(rows)
    assert all(all(tp == p == t for tp, p, t in r["fields"].values()) for r in rows)


def test_a_value_the_grammar_does_not_offer_is_left_null() -> None:
    (case,) = generated_cases([generate_invoice(7, Variant.CLEAN, max_line_items=3)])
    truth = case.record.truth.model_copy(update={"invoice_number": "NOT-PRINTED-1"})
    schema = prepare_call(case.record.ocr_text).json_schema
    answer = json.loads(oracle_answer(truth, case.record.ocr_text, schema))
    assert answer["number"] is None
    assert answer["gross"] is not None
