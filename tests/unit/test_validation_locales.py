"""Validation beyond English, German and French: CLDR dates, symbols, pricing-line currencies."""

from __future__ import annotations

import time
from datetime import date
from decimal import Decimal

import pytest

from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
from pipeline.invoice import CURRENCY_SYMBOLS, Evidence, EvidencedAmount, ReasonCode, date_readings
from pipeline.invoice.currencies import currency_mentions
from pipeline.invoice.dates import european_locales, month_names, month_table
from pipeline.invoice.numbers import number_readings
from pipeline.validation.currency import pricing_lines
from pipeline.validation.decide import check_currency

MARCH_5 = date(2025, 3, 5)


@pytest.mark.parametrize(
    "text",
    [
        "5 de marzo de 2025",  # es
        "miércoles, 5 de marzo de 2025",  # es, day name
        "5. März 2025",  # de
        "Mittwoch, 5. März 2025",
        "5 Maerz 2025",  # de, transliterated
        "March 5, 2025",  # en
        "March 5th, 2025",
        "5th of March 2025",
        "05-Mar-2025",
        "5 maart 2025",  # nl
        "5 marca 2025",  # pl genitive
        "5 marzec 2025",  # pl nominative
        "le 5 mars 2025",  # fr
        "mercredi 5 mars 2025",
        "5 marzo 2025",  # it
        "5 de março de 2025",  # pt
        "5 mars 2025",  # sv
        "5. marts 2025",  # da
        "5. března 2025",  # cs genitive
        "5. maaliskuuta 2025",  # fi partitive
        "5 martie 2025",  # ro
        "5 Μαρτίου 2025",  # el genitive
        "5 марта 2025 г.",  # ru genitive
        "2025. március 5.",  # hu, year first
        "2025 m. kovo 5 d.",  # lt
        "2025. gada 5. marts",  # lv, year-day-month
        "5 de març de 2025",  # ca
        "5 MAR. 2025",  # abbreviated, upper case, trailing dot
    ],
)
def test_connective_and_cldr_month_forms(text: str) -> None:
    assert MARCH_5 in date_readings(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1er mars 2025", date(2025, 3, 1)),
        ("5 d’abril de 2025", date(2025, 4, 5)),
        ("5 Jänner 2025", date(2025, 1, 5)),  # de_AT
        ("5 Sept. 2025", date(2025, 9, 5)),  # en_GB
        ("1 fevrier 2025", date(2025, 2, 1)),  # accent lost in OCR
        ("31 grudnia 2024", date(2024, 12, 31)),  # pl
        ("12 de dezembro de 2024", date(2024, 12, 12)),  # pt
        ("7 okt. 2024", date(2024, 10, 7)),  # nl/sv abbreviations
        ("14 ožujka 2025", date(2025, 3, 14)),  # hr genitive
    ],
)
def test_other_cldr_dates(text: str, value: date) -> None:
    assert value in date_readings(text)


def test_month_names_are_cldr_and_ambiguity_gives_every_reading() -> None:
    assert len(european_locales()) >= 40
    assert {"es", "it", "nl", "pt", "pl", "sv", "da", "fi", "el", "hu"} <= set(european_locales())
    # "listopad" is November in Polish and Czech, October in Croatian: both readings
    assert month_names()["listopad"] == frozenset({10, 11})
    assert {date(2025, 10, 5), date(2025, 11, 5)} <= date_readings("5 listopada 2025")


def test_a_country_settles_a_month_name_of_two_languages() -> None:
    """Grounding reads an ambiguous month name in the supplier's country's languages."""
    assert date_readings("5 listopada 2025", territory="PL") == {date(2025, 11, 5)}
    assert date_readings("5 listopad 2025", territory="HR") == {date(2025, 10, 5)}
    assert date_readings("5. März 2025", territory="ES") == set()


def test_date_readings_do_not_invent_dates() -> None:
    assert date_readings("5 de nada de 2025") == set()
    assert date_readings("Order 12 Stück 2025") == set()
    assert date(2025, 3, 5) not in date_readings("15 de marzo de 2025")


def test_month_table_builds_fast() -> None:
    """Built once per process from Babel's CLDR files; must stay well under a second
    (about 0.1-0.4 s measured on a shared 2-core machine)."""
    month_table.cache_clear()
    started = time.perf_counter()
    month_names()
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1\u202f234,56", "1234.56"),
        ("1\u00a0234,56", "1234.56"),
        ("1\u2009234,56", "1234.56"),
        ("1'234.56", "1234.56"),
        ("1’234.56", "1234.56"),
        ("1.234.567,89", "1234567.89"),
        ("1 234 567,89", "1234567.89"),
    ],
)
def test_cldr_group_separators_read(text: str, value: str) -> None:
    assert Decimal(value) in number_readings(text)


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Razem: 1 234,56 zł", {"PLN"}),
        ("Celkem 1 234,56 Kč", {"CZK"}),
        ("Summa 1 234,56 kr", {"SEK", "NOK", "DKK"}),
        ("Toplam 1.234,56 ₺", {"TRY"}),
        ("Total US$1,234.56", {"USD"}),
        ("Total 1 234,56 €", {"EUR"}),
    ],
)
def test_cldr_currency_symbols(text: str, codes: set[str]) -> None:
    assert [set(c) for _, c in currency_mentions(text)] == [codes]


def test_ascii_letter_symbols_are_not_read_as_currencies() -> None:
    assert currency_mentions("Cable 12 KM, 3 Br, 5 din.") == []
    assert "zł" in CURRENCY_SYMBOLS and "KM" not in CURRENCY_SYMBOLS


# --- which lines price the invoice ----------------------------------------------------------


def _clean() -> GeneratedInvoice:
    """A one-page clean invoice not priced in EUR (so an inserted EUR is foreign)."""
    for seed in range(200):
        inv = generate_invoice(seed, max_line_items=6)
        if inv.currency != "EUR" and inv.ocr_text.count("\f") == 0:
            return inv
    raise AssertionError("no single-page non-EUR invoice")


def _mixed(inv: GeneratedInvoice, text: str) -> bool:
    codes = {r.code for r in check_currency(inv.truth, text, inv.master_data)}
    return ReasonCode.CURRENCY_MIXED in codes


def test_share_capital_in_a_footer_is_not_a_second_currency() -> None:
    inv = _clean()
    footer = "\n\nCapital social 50 000 EUR · RCS Paris 552 100 554\nShare capital: 25 000 EUR\n"
    assert not _mixed(inv, inv.ocr_text + footer)
    assert not _mixed(inv, inv.ocr_text)


def _after_gross(inv: GeneratedInvoice, insert: str) -> str:
    assert inv.truth.gross_total is not None
    end = inv.truth.gross_total.evidence.end
    page = inv.ocr_text
    cut = page.index("\n", end) + 1
    return page[:cut] + insert + page[cut:]


def test_a_second_currency_next_to_the_totals_is_mixed() -> None:
    inv = _clean()
    assert _mixed(inv, _after_gross(inv, "Bank fee: EUR 12.00\n"))
    # the same line after a blank line is a remark, not a price of this invoice
    assert not _mixed(inv, _after_gross(inv, "\nBank fee: EUR 12.00\n"))


def test_a_total_restated_in_a_second_currency_is_mixed_wherever_it_stands() -> None:
    inv = _clean()
    assert inv.truth.gross_total is not None
    quote = inv.truth.gross_total.evidence.quote
    assert _mixed(inv, f"{inv.ocr_text}\n\n\nEquivalent: EUR {quote}\n")


def test_a_second_currency_inside_the_item_table_is_mixed() -> None:
    inv = _clean()
    first = inv.truth.line_items[0].evidence
    cut = inv.ocr_text.index("\n", first.end) + 1
    text = inv.ocr_text[:cut] + "    surcharge 12.00 EUR\n" + inv.ocr_text[cut:]
    assert _mixed(inv, text)


def test_without_amount_evidence_the_whole_text_counts() -> None:
    inv = _clean()
    bare = inv.truth.model_copy(
        update={"line_items": (), "tax_lines": (), "net_total": None, "tax_total": None,
                "gross_total": None}
    )  # fmt: skip
    text = inv.ocr_text + "\n\nShare capital: 25 000 EUR\n"
    assert ReasonCode.CURRENCY_MIXED in {
        r.code for r in check_currency(bare, text, inv.master_data)
    }
    assert pricing_lines(bare, text) == text.split("\n")


def test_pricing_lines_take_whole_lines_of_the_amount_evidence() -> None:
    text = "Header 1 USD\n\nItem A 10.00\nTotal: 10.00 GBP\n\nFooter 5 EUR"
    start = text.index("10.00 GBP")
    ev = Evidence(page=1, start=start, end=start + 5, quote="10.00")
    gross = EvidencedAmount(value=Decimal("10.00"), evidence=ev)
    e = _clean().truth.model_copy(
        update={"line_items": (), "tax_lines": (), "net_total": None, "tax_total": None,
                "gross_total": gross}
    )  # fmt: skip
    assert pricing_lines(e, text) == ["Item A 10.00", "Total: 10.00 GBP"]


@pytest.mark.parametrize("seed", range(6))
def test_currency_mix_variant_still_caught(seed: int) -> None:
    inv = generate_invoice(seed, Variant.CURRENCY_MIX, max_line_items=10)
    assert _mixed(inv, inv.ocr_text)
