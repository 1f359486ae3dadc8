"""The invoice number where the text prints it after the invoice's label: the grammar
offers only that token and grounding refuses any other."""

from __future__ import annotations

import json

import pytest

from benchmarks.invoices.generator import Variant, generate_invoice
from pipeline.extraction import answer_for
from pipeline.extraction.answer import answer_schema
from pipeline.extraction.candidates import labelled_numbers
from pipeline.extraction.layout import Layout
from pipeline.worker import interpret


@pytest.mark.parametrize(
    ("line", "number"),
    [
        ("Faktura nr. 2023/7286", "2023/7286"),
        ("Fakturanummer: F577362", "F577362"),
        ("Nº de factura:  FAC/2024/148", "FAC/2024/148"),
        ("Fatura n.º:  FT-2024-65279", "FT-2024-65279"),
        ("Rechnungs-Nr. RE-17", "RE-17"),
        ("This invoice INV-2025-91177 was issued on January 31, 2025.", "INV-2025-91177"),
        ("Invoice reference: INV-9", "INV-9"),
        ("Invoice No:2024-031", "2024-031"),
    ],
)
def test_the_token_after_the_invoice_label_is_the_number(line: str, number: str) -> None:
    assert labelled_numbers(Layout.read(f"ACME Ltd, 5 Market Street\n{line}\n")) == [number]


@pytest.mark.parametrize(
    "line",
    [
        "Bill to: Jensen ApS, Nørregade 12",  # an invoice word, then no number word
        "Invoice date 30 August 2023",
        "Pago a 45 días fecha factura.",
        "Fecha de factura: 24 de mayo de 2024",  # a date (the grammar's other)
        "Total da fatura 12 429,83 €",  # an amount
    ],
)
def test_no_label_no_labelled_number(line: str) -> None:
    other = frozenset({"24 de mayo de 2024", "12 429,83"})
    assert labelled_numbers(Layout.read(f"{line}\n"), other) == []


def test_eval_invoice_9911_the_street_number_is_neither_offered_nor_grounded() -> None:
    """Off by a cent, seed 9911: SmolLM2 wrote "41" ("Vesterbrogade 41") where
    "Fakturanummer: F577362" is printed; 29 tokens with a digit were offered."""
    inv = generate_invoice(9911, Variant.ARITHMETIC_OFF_BY_CENT, max_line_items=8)
    number = answer_schema(inv.ocr_text)["properties"]["number"]
    assert number["anyOf"][0]["enum"] == ["F577362"]
    answer = {**json.loads(answer_for(inv.candidate, inv.ocr_text)), "number": "41"}
    out = interpret(json.dumps(answer), inv.ocr_text, inv.master_data, today=inv.today)
    assert out.extraction.invoice_number is None
    details = [r.detail for r in out.report.reasons if r.field == "invoice_number"]
    assert any("F577362" in d for d in details), details


def test_without_a_label_no_number_is_offered_that_grounding_would_refuse() -> None:
    # Every printed token with a digit used to be offered here, and grounding refused
    # whichever the model took: only null is left, a missing field for review.
    text = "ACME Ltd\nMarket Street 5\nRef RE-2024-17   date 2024-03-01\nTotal 100.00\n"
    assert answer_schema(text)["properties"]["number"] == {"type": "null"}
    titled = "INVOICE\nACME Ltd\nMarket Street 5\nNo. RE-2024-17   date 2024-03-01\n"
    enum = answer_schema(titled)["properties"]["number"]["anyOf"][0]["enum"]
    assert enum == ["RE-2024-17"]


@pytest.mark.parametrize(
    "line",
    [
        "Anschrift: Rechnungsstraße 12",  # an address that starts with an invoice word
        "Rechnungsjahr 2024",  # a period: a year is no invoice number
        "Billing period 03/2024",
    ],
)
def test_a_compound_that_names_no_number_labels_none(line: str) -> None:
    assert labelled_numbers(Layout.read(f"Nordlicht GmbH\n{line}\n")) == []


@pytest.mark.parametrize(
    ("line", "number"),
    [
        ("Rechnungsnummer: NL-88", "NL-88"),
        ("Belegnr. B-7", "B-7"),
        ("Documento n.º D-12", "D-12"),
        ("Numer faktury FV/3/2024", "FV/3/2024"),
    ],
)
def test_a_compound_or_inflected_invoice_word_still_labels(line: str, number: str) -> None:
    assert labelled_numbers(Layout.read(f"Nordlicht GmbH\n{line}\n")) == [number]


def test_a_title_number_is_offered_where_a_compound_names_an_address() -> None:
    """The number printed in the title ("Handelsrechnung Nr. ...") is offered and
    grounded; the house number of a street whose name starts with "Rechnung" is not."""
    text = (
        "Nordlicht GmbH\nRechnungsstraße 12, 10115 Berlin\n"
        "Sammelrechnung Nr. SR-2024-9 vom 04.03.2024\nSumme 100,00 EUR\n"
    )
    enum = answer_schema(text)["properties"]["number"]["anyOf"][0]["enum"]
    assert "SR-2024-9" in enum and "12" not in enum
