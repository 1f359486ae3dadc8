"""The synthetic invoice generator: determinism, coverage, exact evidence, variants."""

from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.invoices.generator import (
    EXPECTED_CODES,
    INJECTION_CORPUS,
    LANGUAGES,
    LAYOUTS,
    GeneratedInvoice,
    Variant,
    generate_corpus,
    generate_invoice,
)
from pipeline.invoice import IBAN_LENGTHS, Extraction, iban_checksum_ok
from pipeline.invoice.text import BIDI_CONTROLS, mixed_script_tokens
from pipeline.validation import Decision, validate
from pipeline.validation.evidence import evidenced_fields

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SAMPLE = [generate_invoice(seed) for seed in range(150)]


def _values(e: Extraction) -> dict[str, object]:
    """Everything but the evidence: what the invoice says, not where."""
    return e.model_dump(
        exclude={
            "supplier": {"name": {"evidence"}, "vat_id": {"evidence"}},
            "invoice_number": {"evidence"},
            "issue_date": {"evidence"},
            "due_date": {"evidence"},
            "currency": {"evidence"},
            "line_items": {"__all__": {"evidence"}},
            "tax_lines": {"__all__": {"evidence"}},
            "net_total": {"evidence"},
            "tax_total": {"evidence"},
            "gross_total": {"evidence"},
            "iban": {"evidence"},
        }
    )


@pytest.mark.parametrize("variant", list(Variant))
def test_same_seed_same_invoice(variant: Variant) -> None:
    assert generate_invoice(7, variant) == generate_invoice(7, variant)


def test_different_seeds_differ() -> None:
    assert len({inv.ocr_text for inv in SAMPLE}) == len(SAMPLE)


@PROPERTY
@given(seed=st.integers(0, 10**9), variant=st.sampled_from(list(Variant)))
def test_every_truth_span_is_exactly_at_its_offsets(seed: int, variant: Variant) -> None:
    inv = generate_invoice(seed, variant)
    pages = inv.ocr_text.split("\f")
    refs = list(evidenced_fields(inv.truth))
    assert len(refs) == 10 + len(inv.truth.line_items) + len(inv.truth.tax_lines)
    for path, ev, shows_value in refs:
        text = pages[ev.page - 1][ev.start : ev.end]
        assert text == ev.quote, path
        assert shows_value(text), path


def test_coverage_of_languages_currencies_layouts_and_number_styles() -> None:
    assert {inv.language for inv in SAMPLE} == set(LANGUAGES)
    assert {"en", "de", "fr", "es", "it", "nl", "pt", "pl"} <= set(LANGUAGES)
    assert {inv.currency for inv in SAMPLE} >= {"EUR", "USD", "GBP", "CHF"}
    assert {inv.layout for inv in SAMPLE} == set(LAYOUTS)
    assert {"table", "stacked", "ledger"} < set(LAYOUTS)
    styles = {inv.number_style for inv in SAMPLE}
    assert {"en", "de", "fr", "ch"} <= styles
    assert any(s.endswith("-ungrouped") for s in styles)


@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        (r"\d\.\d{3},\d{2}\b", "1.234,56"),
        (r"\d,\d{3}\.\d{2}\b", "1,234.56"),
        (r"\d\u202f\d{3},\d{2}\b", "1 234,56 with a narrow no-break space"),
        (r"\d'\d{3}\.\d{2}\b", "1'234.56"),
        (r"[€£$]", "currency symbols"),
        (r"\b(?:January|März|août|\d{2}\.\d{2}\.\d{4}|\d{4}-\d{2}-\d{2})\b", "date styles"),
    ],
)
def test_number_and_date_formats_appear(pattern: str, what: str) -> None:
    assert any(re.search(pattern, inv.ocr_text) for inv in SAMPLE), what


def test_line_item_counts_span_short_to_long_contexts() -> None:
    counts = [len(inv.truth.line_items) for inv in SAMPLE]
    assert min(counts) == 1 and max(counts) > 100
    assert sum(1 for c in counts if c <= 8) > len(counts) / 3  # most invoices are short
    assert any(inv.ocr_text.count("\f") >= 2 for inv in SAMPLE)


@pytest.mark.parametrize("count", [1, 2, 57, 200])
def test_explicit_line_item_count(count: int) -> None:
    inv = generate_invoice(3, line_items=count)
    assert len(inv.truth.line_items) == count
    if count == 200:
        assert inv.ocr_text.count("\f") >= 3


def test_max_line_items_caps_the_drawn_count() -> None:
    assert all(len(inv.truth.line_items) <= 5 for inv in generate_corpus(40, max_line_items=5))


def test_amounts_are_decimals_with_two_places() -> None:
    for inv in SAMPLE[:30]:
        for item in inv.truth.line_items:
            assert isinstance(item.line_amount, Decimal)
            assert item.line_amount.as_tuple().exponent == -2
        assert inv.truth.gross_total is not None
        assert inv.truth.gross_total.value.as_tuple().exponent == -2


def test_master_data_holds_the_supplier_its_iban_and_the_currency() -> None:
    for inv in SAMPLE:
        assert inv.truth.iban is not None and inv.truth.currency is not None
        assert inv.supplier in inv.master_data.suppliers
        assert inv.supplier.ibans == {inv.truth.iban.value}
        assert iban_checksum_ok(inv.truth.iban.value)
        assert len(inv.truth.iban.value) == IBAN_LENGTHS[inv.truth.iban.value[:2]]
        assert inv.truth.currency.value in inv.master_data.permitted_currencies
        assert len(inv.master_data.suppliers) >= 2


def test_some_supplier_names_are_printed_decomposed() -> None:
    """NFD names (OCR engines emit them) must still match the NFC master record."""
    decomposed = [
        inv
        for inv in SAMPLE
        if inv.truth.supplier.name and inv.truth.supplier.name.value != inv.supplier.name
    ]
    assert decomposed


# --- variants ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant", [v for v in Variant if v not in (Variant.HOMOGLYPH_SUPPLIER, Variant.BIDI_CONTROL)]
)
def test_variants_keep_the_base_invoice(variant: Variant) -> None:
    base = generate_invoice(11)
    inv = generate_invoice(11, variant)
    if variant is Variant.ARITHMETIC_OFF_BY_CENT:
        diffs = _amount_diffs(base.truth, inv.truth)
        assert [abs(d) for d in diffs] == [Decimal("0.01")]
    else:
        assert _values(inv.truth) == _values(base.truth)
    assert inv.language == base.language and inv.layout == base.layout


def _amount_diffs(a: Extraction, b: Extraction) -> list[Decimal]:
    pairs: list[tuple[Decimal, Decimal]] = [
        (x.line_amount, y.line_amount) for x, y in zip(a.line_items, b.line_items, strict=True)
    ]
    pairs += [(x.amount, y.amount) for x, y in zip(a.tax_lines, b.tax_lines, strict=True)]
    for name in ("net_total", "tax_total", "gross_total"):
        x, y = getattr(a, name), getattr(b, name)
        pairs.append((x.value, y.value))
    return [y - x for x, y in pairs if x != y]


def test_document_and_model_variants_are_classified() -> None:
    assert {v for v in Variant if v.in_document} == {
        Variant.ARITHMETIC_OFF_BY_CENT,
        Variant.CURRENCY_MIX,
        Variant.HOMOGLYPH_SUPPLIER,
        Variant.BIDI_CONTROL,
        Variant.PROMPT_INJECTION,
    }
    for v in Variant:
        inv = generate_invoice(5, v)
        if v.in_document and v is not Variant.PROMPT_INJECTION:
            assert inv.candidate == inv.truth
            assert inv.truth_decision is Decision.REVIEW_REQUIRED
        elif v is not Variant.CLEAN:
            assert inv.candidate != inv.truth
            assert inv.truth_decision is Decision.SUCCEEDED
        assert inv.expected_codes or v is Variant.CLEAN


def test_homoglyph_variant_prints_a_lookalike_name() -> None:
    inv = generate_invoice(21, Variant.HOMOGLYPH_SUPPLIER)
    assert inv.truth.supplier.name is not None
    printed = inv.truth.supplier.name.value
    assert printed != inv.supplier.name
    assert any(ord(ch) > 0x36F and ch.isalpha() for ch in printed)  # Cyrillic or Greek
    assert mixed_script_tokens(printed)
    assert printed in inv.ocr_text


def test_bidi_variant_hides_an_override_in_the_name() -> None:
    inv = generate_invoice(21, Variant.BIDI_CONTROL)
    assert inv.truth.supplier.name is not None
    assert set(inv.truth.supplier.name.value) & BIDI_CONTROLS
    assert set(inv.ocr_text) & BIDI_CONTROLS


def test_currency_mix_prints_another_currency() -> None:
    inv = generate_invoice(21, Variant.CURRENCY_MIX)
    others = {"EUR", "USD", "GBP", "CHF"} - {inv.currency}
    assert any(re.search(rf"\b{code} \d", inv.ocr_text) for code in others)


def test_invented_ibans() -> None:
    invented = generate_invoice(21, Variant.INVENTED_IBAN).candidate.iban
    broken = generate_invoice(21, Variant.INVALID_IBAN_CHECKSUM).candidate.iban
    text = generate_invoice(21).ocr_text.replace(" ", "")
    assert invented is not None and broken is not None
    assert iban_checksum_ok(invented.value) and invented.value not in text
    assert not iban_checksum_ok(broken.value) and broken.value not in text


def test_fabricated_evidence_keeps_the_quote_but_moves_the_span() -> None:
    inv = generate_invoice(21, Variant.FABRICATED_EVIDENCE)
    real, fake = inv.truth.gross_total, inv.candidate.gross_total
    assert real is not None and fake is not None
    assert fake.evidence.quote == real.evidence.quote and fake.evidence.start != real.evidence.start


@pytest.mark.parametrize("index", range(len(INJECTION_CORPUS)))
def test_prompt_injection_text_is_in_the_document(index: int) -> None:
    url = "http://127.0.0.1:9/steal"
    inv = generate_invoice(21, Variant.PROMPT_INJECTION, injection_url=url, injection_index=index)
    assert inv.injection is not None and url in inv.injection
    assert url in inv.ocr_text
    assert inv.candidate.iban is not None and inv.truth.iban is not None
    obeyed = inv.candidate.iban
    assert obeyed.value != inv.truth.iban.value and obeyed.value not in inv.supplier.ibans
    page = inv.ocr_text.split("\f")[obeyed.evidence.page - 1]
    assert page[obeyed.evidence.start : obeyed.evidence.end] == obeyed.evidence.quote


def test_injection_corpus_tries_the_classic_moves() -> None:
    joined = "\n".join(INJECTION_CORPUS).lower()
    assert "ignore previous instructions" in joined
    assert all("{url}" in text and text.count("{iban}") == 1 for text in INJECTION_CORPUS)


def test_expected_codes_cover_every_variant() -> None:
    assert set(EXPECTED_CODES) == set(Variant) - {Variant.ARITHMETIC_OFF_BY_CENT}
    codes = {
        next(iter(generate_invoice(s, Variant.ARITHMETIC_OFF_BY_CENT).expected_codes))
        for s in range(30)
    }
    assert len(codes) == 3  # the cent lands on a line, a tax line or the gross total


def test_corpus_cycles_variants_over_consecutive_seeds() -> None:
    corpus = generate_corpus(
        5, seed=100, variants=(Variant.CLEAN, Variant.BIDI_CONTROL), max_line_items=3
    )
    assert [inv.seed for inv in corpus] == [100, 101, 102, 103, 104]
    assert [inv.variant for inv in corpus] == [Variant.CLEAN, Variant.BIDI_CONTROL] * 2 + [
        Variant.CLEAN
    ]
    assert all(isinstance(inv, GeneratedInvoice) for inv in corpus)


def test_anchor_dates_invoices_shortly_before_the_given_day() -> None:
    """A worker validating on the anchor day (its real clock) finds the dates plausible."""
    anchor = date(2031, 5, 17)
    for inv in generate_corpus(20, seed=300, anchor=anchor, max_line_items=5):
        assert inv.truth.issue_date is not None
        issue = inv.truth.issue_date.value
        assert anchor - timedelta(days=60) <= issue <= inv.today <= anchor
        report = validate(inv.truth, inv.ocr_text, inv.master_data, today=anchor)
        assert report.decision is Decision.SUCCEEDED, report.reasons
    plain, anchored = generate_invoice(300), generate_invoice(300, anchor=anchor)
    assert plain.truth.gross_total is not None and anchored.truth.gross_total is not None
    assert plain.truth.gross_total.value == anchored.truth.gross_total.value  # only dates move
