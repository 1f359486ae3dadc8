"""Contract v3, first part (issue 44): document-level allowances and charges (EN 16931
BG-20/BG-21) in the result, in validation's arithmetic, in the stored JSON; never in a
model's grammar or answer, and a v2 result dumps exactly as before."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal

import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from pipeline.errors import MalformedOutput
from pipeline.invoice import (
    AllowanceCharge,
    Evidence,
    Extraction,
    ReasonCode,
    extraction_json_schema,
    parse_extraction,
    uses_v3,
)
from pipeline.validation.decide import check_arithmetic

_XML = Evidence(page=1, start=0, end=0, quote="/ubl:Invoice/cac:AllowanceCharge", match="xml")


@pytest.fixture(scope="module")
def inv() -> GeneratedInvoice:
    """A clean generated invoice with two tax rates."""
    for seed in range(200):
        candidate = generate_invoice(seed, line_items=6)
        if len(candidate.truth.tax_lines) >= 2:
            return candidate
    raise AssertionError("no generated invoice with two tax rates")


def _entry(kind: str, amount: str, rate: Decimal) -> AllowanceCharge:
    return AllowanceCharge.model_validate(
        {"kind": kind, "amount": amount, "tax_rate": rate, "evidence": _XML}
    )


def _adjusted(truth: Extraction, charge: str, allowance: str) -> Extraction:
    """``truth`` with a charge and an allowance at its first tax line's rate, and the net,
    that rate's base and tax, the tax total and the gross made to agree (EN 16931)."""
    tax = truth.tax_lines[0]
    change = Decimal(charge) - Decimal(allowance)
    base = tax.base + change
    amount = (base * tax.rate / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    assert truth.net_total and truth.tax_total and truth.gross_total
    net = truth.net_total.value + change
    tax_total = truth.tax_total.value + amount - tax.amount
    return truth.model_copy(
        update={
            "allowances_charges": (
                _entry("charge", charge, tax.rate),
                _entry("allowance", allowance, tax.rate),
            ),
            "tax_lines": (
                tax.model_copy(update={"base": base, "amount": amount}),
                *truth.tax_lines[1:],
            ),
            "net_total": truth.net_total.model_copy(update={"value": net}),
            "tax_total": truth.tax_total.model_copy(update={"value": tax_total}),
            "gross_total": truth.gross_total.model_copy(update={"value": net + tax_total}),
        }
    )


def test_allowances_and_charges_enter_the_net_and_the_rates_base(inv: GeneratedInvoice) -> None:
    """Sum of line nets - allowances + charges = net (BT-106 - BT-107 + BT-108 = BT-109);
    a rate's base is its lines' nets less its allowances plus its charges."""
    adjusted = _adjusted(inv.truth, charge="30.00", allowance="12.50")
    assert check_arithmetic(adjusted) == []
    # The same totals without the entries do not add up: they are what makes them right.
    bare = adjusted.model_copy(update={"allowances_charges": ()})
    codes = {r.code for r in check_arithmetic(bare)}
    assert codes == {ReasonCode.NET_TOTAL_MISMATCH, ReasonCode.TAX_BASE_MISMATCH}


@pytest.mark.parametrize(("charge", "allowance"), [("31.00", "12.50"), ("30.00", "13.50")])
def test_a_wrong_allowance_or_charge_is_a_net_and_base_mismatch(
    inv: GeneratedInvoice, charge: str, allowance: str
) -> None:
    adjusted = _adjusted(inv.truth, charge="30.00", allowance="12.50")
    wrong = adjusted.model_copy(
        update={
            "allowances_charges": (
                _entry("charge", charge, inv.truth.tax_lines[0].rate),
                _entry("allowance", allowance, inv.truth.tax_lines[0].rate),
            )
        }
    )
    reasons = check_arithmetic(wrong)
    assert {r.code for r in reasons} == {
        ReasonCode.NET_TOTAL_MISMATCH,
        ReasonCode.TAX_BASE_MISMATCH,
    }
    net = next(r for r in reasons if r.code is ReasonCode.NET_TOTAL_MISMATCH)
    assert f"+ charge {charge} - allowance {allowance}" in net.detail


def test_a_v2_result_dumps_as_before_and_a_v3_one_with_its_entries(inv: GeneratedInvoice) -> None:
    dumped = inv.truth.model_dump(mode="json")
    assert "allowances_charges" not in dumped
    assert not uses_v3(inv.truth)
    adjusted = _adjusted(inv.truth, charge="30.00", allowance="12.50")
    assert uses_v3(adjusted)
    stored = adjusted.model_dump(mode="json")
    assert [(e["kind"], e["amount"]) for e in stored["allowances_charges"]] == [
        ("charge", "30.00"),
        ("allowance", "12.50"),
    ]
    assert Extraction.model_validate(stored) == adjusted  # a stored v3 result reads back


def test_no_model_is_offered_or_may_answer_allowances(inv: GeneratedInvoice) -> None:
    """The model path keeps contract v2's place: an invoice that prints allowances
    reviews there as before, whatever a model answers."""
    assert "allowances_charges" not in json.dumps(extraction_json_schema())
    adjusted = _adjusted(inv.truth, charge="30.00", allowance="12.50")
    with pytest.raises(MalformedOutput, match="allowances_charges"):
        parse_extraction(adjusted.model_dump_json())
    assert parse_extraction(inv.truth.model_dump_json()) == inv.truth
