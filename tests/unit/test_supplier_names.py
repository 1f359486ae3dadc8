"""The supplier's name is offered as a choice among the names the page prints as a
party's (issue 41: on the public ZUGFeRD samples the adapter wrote each page's first
line, a stylesheet's title or a date, as the supplier). Pages written here."""

from __future__ import annotations

from pipeline.extraction.answer import schema_for
from pipeline.extraction.layout import Layout
from pipeline.extraction.supplier_names import supplier_candidates


def _names(text: str) -> list[str]:
    return [c.text for c in supplier_candidates(Layout.read(text))]


FORM = """\
Sample invoices for e-invoicing, (c) Example Forum 2022

  Commercial invoice No. 471102 of 05.06.2018

    Verkäufer
    Nummer:                 549910
    Name:                   Lieferant GmbH
    Anschrift:              Lieferantenstraße 20

    Käufer/Leistungsempfänger
    Name:                   Kunden AG Mitte
    Anschrift:              Kundenstraße 15
"""


def test_a_name_cell_in_the_seller_block_is_offered_and_the_buyers_is_not() -> None:
    names = _names(FORM)
    assert names[0] == "Lieferant GmbH"
    assert "Kunden AG Mitte" not in names
    assert not any("Example Forum" in n or "invoice" in n.casefold() for n in names)


def test_the_line_under_a_seller_label_printed_alone_is_offered() -> None:
    page = "Stylesheet for XML invoices\n\nSeller:\n\nPhysiotherapeutin\nTanja Tinder\n"
    assert _names(page) == ["Physiotherapeutin"]


def test_a_name_after_a_seller_label_on_its_line() -> None:
    assert _names("Invoice 17\nSupplier: Acme Tools Ltd\nBill to: Beta Stores Ltd\n") == [
        "Acme Tools Ltd"
    ]


def test_a_legal_form_marks_a_name_in_any_case_where_it_is_long() -> None:
    page = "MUSTERLIEFERANT GMBH\nKaiserstraße 42\n\nRECHNUNG 12\nPAYABLE AS AGREED\n"
    names = _names(page)
    assert names == ["MUSTERLIEFERANT GMBH"]  # "AS" counts only as written after a name


def test_a_word_that_starts_with_a_label_is_no_label() -> None:
    # "Lieferant GmbH" is a name, not the label "Lieferant" followed by a value
    page = "Lieferant GmbH\nLieferantenstraße 20\nKunde: 4711\n"
    assert _names(page) == ["Lieferant GmbH"]


def test_a_name_with_hidden_characters_is_offered_so_validation_names_it() -> None:
    page = "Fratelli \u202e.l.r.S izivreS\u202c\nVia Roma 1\n"
    assert _names(page) == ["Fratelli \u202e.l.r.S izivreS\u202c"]


def test_a_page_that_marks_no_name_leaves_the_supplier_free_text() -> None:
    schema = schema_for(Layout.read("Thanks for your order\nTotal 12,00 EUR\n"))
    assert schema["properties"]["supplier"]["anyOf"][0] == {"type": "string", "maxLength": 80}


def test_the_grammar_offers_the_names() -> None:
    schema = schema_for(Layout.read(FORM))
    offered = schema["properties"]["supplier"]["anyOf"][0]["enum"]
    assert offered[0] == "Lieferant GmbH" and "Kunden AG Mitte" not in offered


def test_a_party_field_under_a_seller_label_is_no_name() -> None:
    # "Nummer        : 549910" and "Globale Nummer: ..." are fields of the party, not
    # its name: the name is the first line under the label that is no field
    page = (
        "Verkäufer:\n"
        "Nummer        : 549910\n"
        "Globale Nummer: 4333741000005 (GTIN)\n"
        "MUSTER-Autovermietung\n"
        "Musterstraße 1\n"
    )
    assert _names(page) == ["MUSTER-Autovermietung"]


ACCOUNT = """\
Verkäufer:

Globale Nummer: 4000001123452 (GTIN)
Grundbesitz GmbH & Co.
Musterstraße 42

Zahlungsart:
Verkäufer-Kontoname   : Kunden AG
Verkäufer-IBAN        : DE02120300000000202051
"""


def test_an_account_holder_is_no_supplier_where_a_seller_label_names_one() -> None:
    # the FeRD "Betriebskostenabrechnung" sample: the seller is Grundbesitz, the
    # account's holder Kunden AG, and the adapter took the holder
    assert _names(ACCOUNT) == ["Grundbesitz GmbH & Co."]


def test_an_account_holder_stays_a_candidate_where_no_label_names_the_seller() -> None:
    page = "INVOICE 17\n\nAccount holder:  Fjord Parts AS\nIBAN: NO9386011117947\n"
    assert _names(page) == ["Fjord Parts AS"]
