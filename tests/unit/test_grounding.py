"""Grounding (contract v2): printed values located, read and evidenced by code.

Hand-written documents for the cases the issue names, plus the whole generator:
a perfect v2 answer grounds to exactly the truth, and every evidence span it
derives is what the page prints at those offsets.
"""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal

import pytest

from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
from pipeline.extraction import answer_for
from pipeline.extraction.answer import (
    Answer,
    ItemRef,
    answer_schema,
    offered_descriptions,
    parse_answer,
)
from pipeline.extraction.grounding import ground
from pipeline.invoice import ReasonCode, SupplierRecord, TenantMasterData
from pipeline.worker import interpret
from tests.support.answers import every_item
from tests.support.pages import NORDWIND_HEAD, NORDWIND_TOTALS

DOC = (
    NORDWIND_HEAD
    + "Pos  Bezeichnung            Menge      Einzelpreis      Betrag   MwSt.\n"
    + "  1  Beratungsleistung      8 Std.          125,00    1.000,00   19 %\n"
    + NORDWIND_TOTALS
)


def _answer(**changes: object) -> Answer:
    base: dict[str, object] = {
        "supplier": "Nordwind Technik GmbH",
        "vat_id": "DE 123 456 789",
        "number": "RE-2024-00017",
        "issue_date": "05.03.2024",
        "due_date": "04.04.2024",
        "currency": "EUR",
        "iban": "DE89 3704 0044 0532 0130 00",
        "net": "1.000,00",
        "tax": "190,00",
        "gross": "1.190,00",
        "items": (ItemRef(line=14, description="Beratungsleistung"),),
        "taxes": (17,),
    }
    base.update(changes)
    return Answer.model_validate(base)


def _line(number: int) -> str:
    return DOC.split("\n")[number - 1]


def test_a_clean_answer_grounds_every_value_with_its_evidence() -> None:
    g = ground(_answer(), DOC)
    e = g.extraction
    assert g.reasons == []
    assert e.gross_total is not None and e.gross_total.value == Decimal("1190.00")
    assert e.issue_date is not None and e.issue_date.value == date(2024, 3, 5)
    assert e.iban is not None and e.iban.value == "DE89370400440532013000"
    (item,) = e.line_items
    assert (item.quantity, item.unit_price, item.line_amount, item.tax_rate) == (
        Decimal(8),
        Decimal("125.00"),
        Decimal("1000.00"),
        Decimal(19),
    )
    (tax,) = e.tax_lines
    assert (tax.rate, tax.base, tax.amount) == (Decimal(19), Decimal("1000.00"), Decimal("190.00"))
    for ev in (e.gross_total.evidence, e.iban.evidence, item.evidence, tax.evidence):
        assert DOC[ev.start : ev.end] == ev.quote  # one page: page offsets are text offsets
        assert ev.line is not None and ev.match == "exact"


def test_a_value_printed_twice_takes_the_occurrence_under_its_label() -> None:
    """1.190,00 is printed in the header box and as the invoice total: the total's
    evidence is the line labelled as the amount due, the last one."""
    e = ground(_answer(), DOC).extraction
    assert e.gross_total is not None
    assert e.gross_total.evidence.line == 18
    assert _line(18).startswith("Rechnungsbetrag")


def test_a_thousands_separator_as_narrow_no_break_space_reads_as_one_number() -> None:
    doc = DOC.replace("1.000,00", "1\u202f000,00").replace("1.190,00", "1\u202f190,00")
    g = ground(_answer(net="1\u202f000,00", gross="1\u202f190,00"), doc)
    assert g.reasons == []
    e = g.extraction
    assert e.net_total is not None and e.net_total.value == Decimal("1000.00")
    assert e.line_items[0].line_amount == Decimal("1000.00")
    assert e.tax_lines[0].base == Decimal("1000.00")


def test_the_supplier_vat_id_is_the_one_in_the_supplier_block() -> None:
    """Both blocks print a VAT id under the same label; a VAT id printed in both blocks
    grounds to the supplier's occurrence, nearest the supplier's name."""
    doc = DOC.replace("DE 987 654 321", "DE 123 456 789")
    e = ground(_answer(), doc).extraction
    assert e.supplier.vat_id is not None
    assert e.supplier.vat_id.evidence.line == 3


def test_a_customer_value_copied_as_the_supplier_is_grounded_where_it_is_printed() -> None:
    """The model took the customer's VAT id: grounding does not correct it, it records
    where it is printed (the customer block), and the supplier rule then refuses it."""
    e = ground(_answer(vat_id="DE 987 654 321"), DOC).extraction
    assert e.supplier.vat_id is not None and e.supplier.vat_id.evidence.line == 11


def test_a_homoglyph_in_the_name_is_kept_as_printed_and_caught_by_validation() -> None:
    """The document prints a Cyrillic 'е'; the model answers in Latin letters. Grounding
    finds the name fuzzily, stores what is printed, and the supplier rule flags it."""
    doc = DOC.replace("Nordwind Technik", "Nordwind T\u0435chnik")
    g = ground(_answer(), doc)
    name = g.extraction.supplier.name
    assert name is not None and "\u0435" in name.value and name.evidence.match == "fuzzy"
    supplier = SupplierRecord(
        "Nordwind Technik GmbH", "DE123456789", frozenset({"DE89370400440532013000"})
    )
    master = TenantMasterData((supplier,), frozenset({"EUR"}))
    out = interpret(
        _dump(_answer()), doc, master, today=date(2024, 3, 20), contract="fenceline.extraction/2"
    )
    assert out.report.codes & {ReasonCode.SUPPLIER_CONFUSABLE, ReasonCode.SUPPLIER_MIXED_SCRIPT}


def test_an_iban_printed_in_groups_is_stored_compact_with_its_printed_evidence() -> None:
    e = ground(_answer(), DOC).extraction
    assert e.iban is not None
    assert e.iban.value == "DE89370400440532013000"
    assert e.iban.evidence.quote == "DE89 3704 0044 0532 0130 00"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("gross", "1.191,00", "gross_total"),
        ("iban", "DE89 3704 0044 0532 0130 01", "iban"),
        ("number", "RE-2024-00018", "invoice_number"),
        ("issue_date", "06.03.2024", "issue_date"),
        ("net", "000,00", "net_total"),  # printed only inside "1.000,00"
    ],
)
def test_a_value_not_printed_becomes_null_with_ungrounded_value(
    field: str, value: str, path: str
) -> None:
    g = ground(_answer(**{field: value}), DOC)
    assert [(r.code, r.field) for r in g.reasons] == [(ReasonCode.UNGROUNDED_VALUE, path)]
    assert getattr(g.extraction, path) is None


def test_a_cited_line_without_a_row_is_ungrounded() -> None:
    g = ground(_answer(items=(ItemRef(line=2, description="Hauptstraße"),)), DOC)
    assert g.extraction.line_items == ()
    assert [r.code for r in g.reasons] == [ReasonCode.UNGROUNDED_VALUE]


def test_a_row_that_does_not_add_up_is_read_as_printed_for_the_arithmetic_rule() -> None:
    doc = DOC.replace("1.000,00   19 %", "1.000,01   19 %")
    (item,) = ground(_answer(), doc).extraction.line_items
    assert item.line_amount == Decimal("1000.01")  # read, not corrected


def _dump(answer: Answer) -> str:
    from pipeline.extraction.answer import dump_answer

    return dump_answer(answer)


def test_every_generated_clean_invoice_grounds_to_its_truth() -> None:
    """The whole generator: a perfect v2 answer grounds to the truth's values, and
    validation accepts it (the model is the only thing left to be wrong)."""
    for seed in range(120):
        inv = generate_invoice(seed, max_line_items=12)
        out = interpret(
            answer_for(inv.truth, inv.ocr_text), inv.ocr_text, inv.master_data, today=inv.today
        )
        assert out.report.reasons == (), (seed, out.report.reasons)
        got = out.extraction.model_dump(exclude={"uncertain_fields"})
        want = inv.truth.model_dump(exclude={"uncertain_fields"})
        _strip_evidence(got)
        _strip_evidence(want)
        assert got == want, seed
        pages = inv.ocr_text.split("\f")
        for item in out.extraction.line_items:
            ev = item.evidence
            assert pages[ev.page - 1][ev.start : ev.end] == ev.quote


def _strip_evidence(node: object) -> None:
    if isinstance(node, dict):
        node.pop("evidence", None)
        for value in node.values():
            _strip_evidence(value)
    elif isinstance(node, list | tuple):
        for value in node:
            _strip_evidence(value)


def test_document_variants_reach_review_with_a_perfect_answer() -> None:
    for variant in (
        Variant.ARITHMETIC_OFF_BY_CENT,
        Variant.CURRENCY_MIX,
        Variant.HOMOGLYPH_SUPPLIER,
        Variant.BIDI_CONTROL,
        Variant.PROMPT_INJECTION,
        Variant.INVENTED_IBAN,
        Variant.INVALID_IBAN_CHECKSUM,
        Variant.FABRICATED_EVIDENCE,
    ):
        for seed in range(25):
            inv = generate_invoice(seed, variant, max_line_items=8)
            out = interpret(
                answer_for(inv.candidate, inv.ocr_text),
                inv.ocr_text,
                inv.master_data,
                today=inv.today,
            )
            assert out.report.decision.value == "REVIEW_REQUIRED", (variant, seed)


def test_a_stacked_row_cited_on_its_number_line_finds_its_description_above() -> None:
    inv = next(
        c for s in range(200) if (c := generate_invoice(s, max_line_items=4)).layout == "stacked"
    )
    answer = every_item(answer_for(inv.truth, inv.ocr_text), inv.ocr_text)
    shifted = answer.model_copy(
        update={"items": tuple(ItemRef(r.line + 1, r.description) for r in answer.items or ())}
    )
    g = ground(shifted, inv.ocr_text)
    assert g.reasons == []
    assert [i.description for i in g.extraction.line_items] == [
        i.description for i in inv.truth.line_items
    ]
    assert [i.line_amount for i in g.extraction.line_items] == [
        i.line_amount for i in inv.truth.line_items
    ]


def test_a_date_printed_only_as_a_delivery_date_is_refused_for_the_issue_date() -> None:
    doc = DOC.replace(
        "Rechnungsdatum: 05.03.2024", "Rechnungsdatum: 05.03.2024\nLieferdatum: 01.03.2024"
    )
    g = ground(_answer(issue_date="01.03.2024"), doc)
    assert [(r.code, r.field) for r in g.reasons] == [(ReasonCode.UNGROUNDED_VALUE, "issue_date")]
    # The same date printed as the issue date too is the issue date.
    same = DOC.replace("Fällig am", "Lieferdatum: 05.03.2024\nFällig am")
    assert ground(_answer(), same).reasons == []


def test_a_month_name_of_two_languages_is_refused_not_guessed() -> None:
    doc = DOC.replace("Rechnungsdatum: 05.03.2024", "Data wystawienia: 5 listopada 2023")
    g = ground(_answer(issue_date="5 listopada 2023"), doc)
    assert g.extraction.issue_date is None
    assert [r.field for r in g.reasons] == ["issue_date"]


def test_a_month_name_of_two_languages_is_read_in_the_supplier_country() -> None:
    """The Polish "listopada" is November, October in Croatian: a Polish supplier (its
    IBAN and VAT id) settles it; the eval lost two Polish invoices to the refusal."""
    doc = (
        DOC.replace("Rechnungsdatum: 05.03.2024", "Data wystawienia: 5 listopada 2023")
        .replace("DE 123 456 789", "PL 5213 0000 12")
        .replace("DE89 3704 0044 0532 0130 00", "PL61 1090 1014 0000 0712 1981 2874")
    )
    answer = _answer(
        issue_date="5 listopada 2023",
        vat_id="PL 5213 0000 12",
        iban="PL61 1090 1014 0000 0712 1981 2874",
    )
    g = ground(answer, doc)
    assert g.extraction.issue_date is not None
    assert g.extraction.issue_date.value == date(2023, 11, 5)
    assert "issue_date" not in [r.field for r in g.reasons]


def _generated(seed: int) -> tuple[GeneratedInvoice, Answer]:
    inv = generate_invoice(seed, Variant.CLEAN, max_line_items=8)
    return inv, every_item(answer_for(inv.truth, inv.ocr_text), inv.ocr_text)


@pytest.mark.parametrize(
    ("seed", "index", "part"),
    [
        (5053, 0, "Service"),  # "1 st Service av värmeanläggning à 421,93" (sv prose)
        (5055, 0, "Heizungsanlage"),  # "1 Stk. Wartung Heizungsanlage zu je 118.57" (de prose)
    ],
)
def test_a_part_of_a_printed_description_is_never_stored(seed: int, index: int, part: str) -> None:
    """The eval's two false accepts: the model wrote the start or the end of a row's
    description; the row was found by it and the stored description was cut short.
    Now the table's other rows show how its descriptions are printed and arithmetic
    proves the table whole, so code reads that row itself, description whole; without
    that proof the item is refused. The part is stored in neither case."""
    inv, answer = _generated(seed)
    items = list(answer.items or ())
    items[index] = ItemRef(items[index].line, part)
    cut = answer.model_copy(update={"items": tuple(items)})
    g = ground(cut, inv.ocr_text)
    assert g.reasons == []
    item = g.extraction.line_items[index]
    assert item.description == inv.truth.line_items[index].description != part
    assert item.evidence.match == "arithmetic"
    # The net the model copied is not what the rows add up to: nothing proves the table.
    unproven = ground(cut.model_copy(update={"net": answer.gross}), inv.ocr_text)
    assert [r.field for r in unproven.reasons if r.field.startswith("line_items")] == [
        f"line_items[{index}]"
    ]
    assert all(i.description != part for i in unproven.extraction.line_items)
    whole = ground(answer, inv.ocr_text)
    assert whole.reasons == []


def test_an_item_written_past_the_last_row_is_dropped_and_the_rest_succeeds() -> None:
    inv, answer = _generated(5017)  # one row; the model added [22, "212-232 23"]
    extra = (*(answer.items or ()), ItemRef(22, "212-232 23"))
    out = interpret(
        answer.model_copy(update={"items": extra}).model_dump_json(),
        inv.ocr_text,
        inv.master_data,
        today=inv.today,
    )
    assert out.report.decision.value == "SUCCEEDED", out.report.reasons
    assert len(out.extraction.line_items) == 1


def test_a_date_printed_only_after_a_delivery_label_is_no_choice_for_the_model() -> None:
    inv, answer = _generated(5047)  # "... delivered on December 25, 2022"
    props = answer_schema(inv.ocr_text)["properties"]
    issue, due = (props[k]["anyOf"][0]["enum"] for k in ("issue_date", "due_date"))
    assert "December 25, 2022" in inv.ocr_text
    assert "December 25, 2022" not in issue + due
    assert answer.issue_date in issue and answer.due_date in due


@pytest.mark.parametrize("day", [date(2026, 12, 3), date(2026, 12, 4), date(2027, 3, 1)])
def test_a_date_printed_only_as_the_other_date_is_no_choice_for_the_model(day: date) -> None:
    """Demo invoice 4 (seed 2029): "Data wystawienia: 21 października 2026" and "Termin
    płatności: 20 listopada 2026". SmolLM2 copied the due date as the issue date, which
    grounding refuses; the grammar now offers each field only the dates it may be."""
    inv = generate_invoice(2029, Variant.ARITHMETIC_OFF_BY_CENT, max_line_items=3, anchor=day)
    answer = parse_answer(answer_for(inv.truth, inv.ocr_text))
    props = answer_schema(inv.ocr_text)["properties"]
    issue, due = (props[k]["anyOf"][0]["enum"] for k in ("issue_date", "due_date"))
    assert answer.issue_date is not None and answer.due_date is not None
    assert answer.issue_date != answer.due_date
    assert issue == [answer.issue_date]
    assert due == [answer.due_date]


def _decide(inv: GeneratedInvoice, answer: Answer) -> tuple[str, list[str], object]:
    out = interpret(answer.model_dump_json(), inv.ocr_text, inv.master_data, today=inv.today)
    return out.report.decision.value, [r.code.value for r in out.report.reasons], out.extraction


def test_a_column_header_above_a_one_row_table_is_no_row() -> None:
    """Seed 5017: "Service | Quantity | Rate | Line total | Tax" above one row. The header
    read as a stacked row over the item's numbers, so an item "Service" took them a
    second time; now "Service" is no description the grammar offers, and an item that
    names it is on no row: dropped once the real row is taken, in either order."""
    inv, answer = _generated(5017)
    assert offered_descriptions(inv.ocr_text) == ["Office chair"]
    (item,) = answer.items or ()
    for items in ((item, ItemRef(18, "Service")), (ItemRef(18, "Service"), item)):
        decision, reasons, extraction = _decide(inv, answer.model_copy(update={"items": items}))
        assert decision == "SUCCEEDED", reasons
        assert [i.description for i in extraction.line_items] == ["Office chair"]  # type: ignore[attr-defined]


def test_a_row_written_twice_is_read_once_and_the_copy_dropped() -> None:
    """Seed 5027: the model wrote "Gazole" four times for three rows; the copy takes
    nothing from another item, so it is dropped and the invoice succeeds."""
    inv, answer = _generated(5027)
    items = list(answer.items or ())
    gazole = next(i for i in items if i.description == "Gazole")
    items.insert(3, gazole)
    decision, reasons, extraction = _decide(inv, answer.model_copy(update={"items": tuple(items)}))
    assert decision == "SUCCEEDED", reasons
    assert len(extraction.line_items) == len(answer.items or ())  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [5007, 5054])
def test_the_gross_copied_as_the_tax_total_is_put_right_by_the_arithmetic(seed: int) -> None:
    """Seeds 5007 and 5054: the model wrote the gross for the tax total. The line
    amounts give the net, the tax lines the tax; gross - net is printed: that is taken,
    its evidence marked ``arithmetic``."""
    inv, answer = _generated(seed)
    decision, reasons, extraction = _decide(inv, answer.model_copy(update={"tax": answer.gross}))
    assert decision == "SUCCEEDED", reasons
    tax = extraction.tax_total  # type: ignore[attr-defined]
    assert inv.truth.tax_total is not None
    assert tax.value == inv.truth.tax_total.value and tax.evidence.match == "arithmetic"


def test_totals_that_disagree_on_the_page_are_never_put_right() -> None:
    """The off-by-a-cent trap: no total holds another's value, so nothing is replaced."""
    for seed in range(6):
        inv = generate_invoice(seed, Variant.ARITHMETIC_OFF_BY_CENT, max_line_items=8)
        answer = parse_answer(answer_for(inv.candidate, inv.ocr_text))
        decision, _, extraction = _decide(inv, answer.model_copy(update={"tax": answer.gross}))
        assert decision == "REVIEW_REQUIRED"
        assert extraction.tax_total is None or extraction.tax_total.evidence.match != "arithmetic"  # type: ignore[attr-defined]


def _wrong_items(seed: int, change: str) -> tuple[GeneratedInvoice, Answer, int]:
    inv, answer = _generated(seed)
    items = list(answer.items or ())
    if change == "shortened":  # seed 5055 row 3: "668 Stk. Stahlwinkel 40 mm zu je 2.32: ..."
        assert items[2].description == "Stahlwinkel 40 mm"
        items[2], wrong = ItemRef(items[2].line, "Stahlwinkel"), 2
    elif change == "printed_nowhere":
        items[1], wrong = ItemRef(items[1].line, "Heating equipment"), 1
    else:  # "taken_by_another": row 1 is missing, its neighbour's description written twice
        # (the copy takes row 2 first, so the item refused is the one after it)
        items[0], wrong = ItemRef(items[0].line, items[1].description), 1
    return inv, answer.model_copy(update={"items": tuple(items)}), wrong


@pytest.mark.parametrize(
    ("seed", "change"),
    [(5055, "shortened"), (5055, "printed_nowhere"), (5027, "taken_by_another")],
)
def test_rows_the_model_got_wrong_are_read_by_code_only_when_arithmetic_proves_the_table(
    seed: int, change: str
) -> None:
    """A wrong item (a shortened description, one printed nowhere, a row left out and
    its neighbour written twice): when every row that adds up, together, equals the net
    the model copied and the model's other descriptions show how the table prints them,
    code reads the rows the model missed (evidence ``arithmetic``) and the items are
    the truth's; without that proof the wrong item is refused, never dropped or stored."""
    inv, answer, wrong = _wrong_items(seed, change)
    proven = ground(answer, inv.ocr_text)
    assert proven.reasons == []
    got = [(i.description, i.line_amount) for i in proven.extraction.line_items]
    assert got == [(i.description, i.line_amount) for i in inv.truth.line_items]
    assert any(i.evidence.match == "arithmetic" for i in proven.extraction.line_items)
    unproven = ground(answer.model_copy(update={"net": answer.gross}), inv.ocr_text)
    refused = [r for r in unproven.reasons if r.field.startswith("line_items")]
    assert [r.field for r in refused] == [f"line_items[{wrong}]"]
    assert {r.code for r in refused} == {ReasonCode.UNGROUNDED_VALUE}


@pytest.mark.parametrize(
    ("seed", "field", "wrong"),
    [
        # "Leistungsdatum   14. August 2024" (the service date), 34 spaces from its label
        (7203, "issue_date", "14. August 2024"),
        # "Fecha de emisión:  28/02/2025" (the issue date) copied as the due date
        (7211, "due_date", "28/02/2025"),
    ],
)
def test_a_date_printed_only_as_another_date_is_refused(seed: int, field: str, wrong: str) -> None:
    """The two false accepts of a fresh-seed eval (seeds 7200-7211): the model copied
    the service date as the issue date and the issue date as the due date; both are
    printed, so nothing else caught them. A date is taken only where its label is not
    the label of another date."""
    inv, answer = _generated(seed)
    assert wrong in inv.ocr_text and getattr(answer, field) != wrong
    g = ground(answer.model_copy(update={field: wrong}), inv.ocr_text)
    assert [r.field for r in g.reasons] == [field]
    assert getattr(g.extraction, field) is None
    assert ground(answer, inv.ocr_text).reasons == []


# ---- the invoice's own number, not another document's --------------------------------


def _with_line(line: str) -> str:
    """DOC with ``line`` printed under the invoice number's line (line 7)."""
    lines = DOC.split("\n")
    return "\n".join([*lines[:6], line, *lines[6:]])


def _shifted(**changes: object) -> Answer:
    """:func:`_answer` for a DOC with one more line above the items (:func:`_with_line`)."""
    item = ItemRef(line=15, description="Beratungsleistung")
    return _answer(items=(item,), taxes=(18,), **changes)


def _number_reasons(doc: str, number: str) -> list[str]:
    g = ground(_shifted(number=number), doc)
    return [r.detail for r in g.reasons if r.field == "invoice_number"]


@pytest.mark.parametrize(
    "line, number",
    [
        ("Votre commande: 4504665309", "4504665309"),  # eval seed 8047: accepted before
        ("Ihre Bestellung: 4504665309", "4504665309"),
        ("Kundennummer: 90631", "90631"),
        ("PO number: PO-25363", "PO-25363"),
        ("Uw referentie: 77120", "77120"),
        ("Lieferschein 55-1201 vom 01.03.2024", "55-1201"),
        ("Invoice 2024/17 for order 4504", "4504"),
    ],
)
def test_a_number_printed_as_another_documents_is_not_the_invoice_number(
    line: str, number: str
) -> None:
    [detail] = _number_reasons(_with_line(line), number)
    assert "printed as another number" in detail


@pytest.mark.parametrize(
    "line, number",
    [
        ("Invoice 2024/17 for order 4504", "2024/17"),
        ("Order 55, invoice no. 8812", "8812"),
        ("Invoice reference: INV-9", "INV-9"),
        ("Réf. facture 2024-031", "2024-031"),
    ],
)
def test_an_invoice_label_nearer_than_a_decoy_keeps_the_number(line: str, number: str) -> None:
    assert _number_reasons(_with_line(line), number) == []


def test_a_number_printed_under_both_labels_grounds_at_the_invoice_label() -> None:
    doc = _with_line("Ihre Bestellung: RE-2024-00017")
    g = ground(_shifted(), doc)
    assert g.reasons == []
    assert g.extraction.invoice_number is not None
    assert g.extraction.invoice_number.evidence.line == 5


def test_no_generated_order_or_customer_number_passes_as_the_invoice_number() -> None:
    """Every order, customer and reference number the generator prints, put in a perfect
    answer as the invoice number, is refused (1,290 of 1,290 over seeds 0-1499 were
    accepted before the rule); the perfect answer itself still grounds cleanly."""
    decoys = ("commande", "order", "bestell", "pedido", "ordine", "zamów", "beställ", "ordre",
              "encomenda", "client", "kunde", "klant", "kund", "referen", "requisi", "rekvisit",
              "auftrag", "debiteur")  # fmt: skip
    tried = 0
    for seed in range(150):
        inv = generate_invoice(seed, max_line_items=3)
        perfect = answer_for(inv.truth, inv.ocr_text)
        clean = interpret(perfect, inv.ocr_text, inv.master_data, today=inv.today)
        assert clean.report.reasons == ()
        assert inv.truth.invoice_number is not None
        for line in inv.ocr_text.splitlines():
            m = re.search(r"[:#]?\s*([A-Z0-9][A-Z0-9/\-]{3,})\s*$", line)
            if not any(w in line.lower() for w in decoys) or m is None:
                continue
            if m.group(1) == inv.truth.invoice_number.value:
                continue
            wrong = json.loads(perfect)
            wrong["number"] = m.group(1)
            out = interpret(json.dumps(wrong), inv.ocr_text, inv.master_data, today=inv.today)
            codes = {r.code for r in out.report.reasons if r.field == "invoice_number"}
            assert ReasonCode.UNGROUNDED_VALUE in codes, (seed, line)
            tried += 1
    assert tried > 100


def test_a_sign_before_a_full_stop_is_read_without_the_stop_where_only_that_fits() -> None:
    """Eval invoice gen-9303 (Swedish prose) ends "Att betala: 4 300,96 kr."; SmolLM2
    copied "kr." (with the sentence's full stop), a sign for DKK or ISK, and grounding
    refused it for a supplier paid to a Swedish IBAN. Without the stop, "kr" in Sweden
    is SEK; a Danish supplier's "kr." stays DKK."""
    inv = generate_invoice(9303, Variant.CLEAN, max_line_items=3, layouts=("prose",))
    assert "Att betala: " in inv.ocr_text and " kr.\n" in inv.ocr_text
    answer = parse_answer(answer_for(inv.truth, inv.ocr_text)).model_copy(
        update={"currency": "kr."}
    )
    out = interpret(answer.model_dump_json(), inv.ocr_text, inv.master_data, today=inv.today)
    assert out.report.decision.value == "SUCCEEDED", out.report.reasons
    assert out.extraction.currency is not None
    assert out.extraction.currency.value == "SEK"
    assert out.extraction.currency.evidence.quote == "kr"

    danish = inv.ocr_text.replace("SE8970669093000561974698", "DK5000400440116243")
    answer = answer.model_copy(update={"iban": "DK5000400440116243"})
    currency = ground(answer, danish).extraction.currency
    assert currency is not None and currency.value == "DKK"
    assert currency.evidence.quote == "kr."


def test_the_issue_date_is_no_choice_for_the_due_date() -> None:
    """Eval invoice gen-9419 (Danish key-value): "Fakturadato 21-05-2025" was no issue
    label, so the due date's grammar offered it and SmolLM2 copied it as the due date:
    a false accept. Over seeds 0-1499 and 5000-5599, 313 grammars still offered one
    date for the other before the Danish and prose issue labels ("vom", "se emitió
    el", "er udstedt den", ...); none now."""
    tried = 0
    for seed in (9419, *range(5000, 5600, 7)):
        inv = generate_invoice(seed, Variant.CLEAN, max_line_items=8)
        answer = parse_answer(answer_for(inv.truth, inv.ocr_text))
        if answer.issue_date is None or answer.due_date in (None, answer.issue_date):
            continue  # one date: nothing to confuse
        props = answer_schema(inv.ocr_text)["properties"]
        issue, due = (props[k]["anyOf"][0]["enum"] for k in ("issue_date", "due_date"))
        assert answer.issue_date in issue and answer.issue_date not in due, seed
        assert answer.due_date in due and answer.due_date not in issue, seed
        tried += 1
    assert tried > 60


def test_words_without_a_digit_are_no_invoice_number() -> None:
    """Eval invoice gen-9708: SmolLM2 wrote the customer "Bianchi S.r.l." as the invoice
    number; it is printed, so grounding took it and the invoice was a false accept. An
    engine without the grammar (an OpenAI-compatible provider) may still write it."""
    inv, answer = _generated(9708)
    assert "Bianchi S.r.l." in inv.ocr_text
    decision, reasons, extraction = _decide(
        inv, answer.model_copy(update={"number": "Bianchi S.r.l."})
    )
    assert decision == "REVIEW_REQUIRED"
    assert "ungrounded_value" in reasons
    assert extraction.invoice_number is None  # type: ignore[attr-defined]
    assert _decide(inv, answer)[0] == "SUCCEEDED"
    # offered every printed token with a digit, it then copied the BIC
    decision, reasons, _ = _decide(inv, answer.model_copy(update={"number": "BCITIT22XXX"}))
    assert (decision, reasons) == ("REVIEW_REQUIRED", ["ungrounded_value", "missing_field"])
