"""The generator in every language and layout family: perfect answers pass, variants never do."""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import date, timedelta
from typing import Any

import pytest

from benchmarks.invoices.catalog import BUYERS, CATALOG, UNITS
from benchmarks.invoices.generator import (
    LANGUAGES,
    LAYOUTS,
    GeneratedInvoice,
    Variant,
    generate_corpus,
    generate_invoice,
)
from benchmarks.invoices.lexicon import LEXICON, PREFIXES
from benchmarks.invoices.locales import COUNTRIES, Country, fmt_date
from benchmarks.invoices.plan import make_iban
from pipeline.invoice import IBAN_LENGTHS, Extraction, ReasonCode, date_readings, iban_checksum_ok
from pipeline.validation import Decision, ValidationReport, validate

CLEAN_SEEDS = range(300)


def _decide(inv: GeneratedInvoice, extraction: Extraction | None = None) -> ValidationReport:
    chosen = inv.truth if extraction is None else extraction
    return validate(chosen, inv.ocr_text, inv.master_data, today=inv.today)


def test_languages_and_layouts_on_offer() -> None:
    assert {"en", "de", "fr", "es", "it", "nl", "pt", "pl"} <= set(LANGUAGES)
    assert len(LANGUAGES) >= 8
    assert {"table", "stacked", "ledger", "keyvalue", "prose", "columns"} == set(LAYOUTS)
    spoken = {lang for country in COUNTRIES for lang in country.languages}
    assert spoken == set(LANGUAGES)  # every language has a country that writes it


def test_perfect_answers_pass_on_every_clean_invoice() -> None:
    """The truth of every clean invoice is accepted, whatever its language and layout."""
    seen: Counter[tuple[str, str]] = Counter()
    for seed in CLEAN_SEEDS:
        inv = generate_invoice(seed, max_line_items=8)
        report = _decide(inv)
        assert report.decision is Decision.SUCCEEDED, (seed, inv.language, inv.layout, report)
        seen[(inv.language, inv.layout)] += 1
    assert {lang for lang, _ in seen} == set(LANGUAGES)
    assert {layout for _, layout in seen} == set(LAYOUTS)


@pytest.mark.parametrize("language", LANGUAGES)
def test_perfect_answers_pass_in_every_language_times_layout(language: str) -> None:
    for layout in LAYOUTS:
        for seed in range(2):
            inv = generate_invoice(seed, max_line_items=5, languages=(language,), layouts=(layout,))
            assert (inv.language, inv.layout) == (language, layout)
            report = _decide(inv)
            assert report.decision is Decision.SUCCEEDED, (seed, language, layout, report)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("variant", [v for v in Variant if v is not Variant.CLEAN])
def test_no_variant_is_ever_accepted(layout: str, variant: Variant) -> None:
    """0 false accepts: every adversarial candidate is REVIEW_REQUIRED with its reason."""
    languages = set()
    for seed in range(4):
        inv = generate_invoice(seed, variant, max_line_items=6, layouts=(layout,))
        languages.add(inv.language)
        report = _decide(inv, inv.candidate)
        assert report.decision is Decision.REVIEW_REQUIRED, (seed, inv.language)
        assert inv.expected_codes <= report.codes, (seed, inv.language, report.reasons)
        assert _decide(inv).decision is inv.truth_decision, (seed, inv.language)
    assert len(languages) >= 2


def test_share_capital_footer_in_another_currency_passes_and_currency_mix_fails() -> None:
    footers = 0
    for seed in range(200):
        inv = generate_invoice(seed, max_line_items=3)
        footer = "\n".join(inv.ocr_text.split("\n")[-3:])  # the last lines: legal footer
        capital = re.search(r"\d\s?(EUR|CHF|GBP|PLN|SEK|DKK)\b", footer)
        if capital is None or capital.group(1) == inv.currency:
            continue
        footers += 1
        assert _decide(inv).decision is Decision.SUCCEEDED, inv.ocr_text
        mixed = generate_invoice(seed, Variant.CURRENCY_MIX, max_line_items=3)
        assert ReasonCode.CURRENCY_MIXED in _decide(mixed).codes
    assert footers >= 5


def test_restricting_languages_and_layouts() -> None:
    held_out = [
        inv
        for inv in generate_corpus(
            40, max_line_items=2, languages=("pl",), layouts=("prose", "columns")
        )
    ]
    assert {inv.language for inv in held_out} == {"pl"}
    assert {inv.layout for inv in held_out} == {"prose", "columns"}
    rest = tuple(lang for lang in LANGUAGES if lang != "nl")
    shapes = tuple(layout for layout in LAYOUTS if layout != "keyvalue")
    training = generate_corpus(80, max_line_items=2, languages=rest, layouts=shapes)
    assert all(inv.language != "nl" and inv.layout != "keyvalue" for inv in training)
    again = generate_invoice(5, max_line_items=2, languages=("pl",), layouts=("prose",))
    assert again == generate_invoice(5, max_line_items=2, languages=("pl",), layouts=("prose",))


@pytest.mark.parametrize(
    "kwargs", [{"languages": ()}, {"languages": ("xx",)}, {"layouts": ("poster",)}]
)
def test_unknown_language_or_layout_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        generate_invoice(1, **kwargs)


@pytest.mark.parametrize("country", COUNTRIES, ids=lambda c: c.code)
def test_every_country_makes_valid_ibans(country: Country) -> None:
    rng = random.Random(country.code)
    for _ in range(50):
        iban = make_iban(rng, country)
        assert iban_checksum_ok(iban) and len(iban) == IBAN_LENGTHS[country.code], iban


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_printed_date_reads_back_with_cldr(language: str) -> None:
    """The generator's own month tables and formats, read by validation's CLDR tables."""
    day = date(2024, 1, 9)
    for _ in range(12):
        for style in range(6):
            printed = fmt_date(day, language, style)
            assert day in date_readings(printed), printed
        day += timedelta(days=31)


def test_locale_data_is_complete() -> None:
    keys = set(LEXICON["en"])
    for language in LANGUAGES:
        assert set(LEXICON[language]) == keys, language
        assert all(language in product.names for product in CATALOG)
        assert set(UNITS[language]) == {"h", "pcs", "kg", "l", "words"}
        assert BUYERS[language] and PREFIXES[language]


def test_decoys_and_varied_labels_appear() -> None:
    texts = [generate_invoice(seed, max_line_items=2).ocr_text for seed in range(120)]
    assert sum("PO-" in t or "45" in t for t in texts) > 20  # order numbers
    assert sum("+4" in t or "+3" in t for t in texts) > 20  # phone numbers
    en = [generate_invoice(s, max_line_items=1, languages=("en",)).ocr_text for s in range(60)]
    labels = {"Invoice no.", "Invoice #", "Invoice number", "Document number", "Bill number"}
    assert sum(any(label in t for t in en) for label in labels) >= 4
