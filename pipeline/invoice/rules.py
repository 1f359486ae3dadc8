"""The rule ids: every rule that changes a value or refuses one, named and described.

A :class:`~pipeline.invoice.reasons.Reason` names the rule that gave it
(``Reason.rule``), and grounding names the rule behind each value it changed
(:class:`pipeline.extraction.grounding.Change`), so ``fenceline eval`` and
``fenceline fuzz`` count each rule on a dataset: a rule that never fires, or fires
only on what other rules catch, earns nothing and can go.

Ids are stable (a stored reason keeps its id), dotted, and grouped by what the rule
proves: ``grounding.*`` (a value is printed), ``label.*`` (a header field's label
proves its role), ``roles.*`` (a table cell's role), ``items.*``, ``tax_lines.*``,
``terms.*`` (payment terms), ``totals.*`` (the constraint step over the totals,
:mod:`pipeline.extraction.totals`), ``correction.*`` (a reviewer's correction) and
``validation.*`` (the validator's checks). A unit test checks that every id the code
passes as ``rule=`` is here and every id here is used.
"""

from __future__ import annotations

from collections.abc import Mapping

RULES: Mapping[str, str] = {
    # grounding: the value is printed and reads as its type
    "grounding.not_printed": "the value is not printed in the document",
    "grounding.amount_unreadable": "the printed amount does not read as a number",
    "grounding.currency_sign_ambiguous": "a currency sign may mean several currencies",
    # header fields: the label proves the role
    "label.invoice_number.no_digit": "an invoice number holds a digit",
    "label.invoice_number.other_document": "a number printed as another document's is refused",
    "label.invoice_number.date_part": "a part of a printed date is no invoice number",
    "label.invoice_number.not_labelled_value": "the invoice's label prints another number",
    "label.invoice_number.bare_year": "a bare year is no invoice number without its label",
    "label.invoice_number.no_label": "no label proves the number is the invoice's",
    "label.invoice_number.part_of_longer": "the number may be part of a longer one",
    "label.invoice_number.rival": "two or more numbers a label proves: none is picked",
    "label.date.other_document": "a date printed as another date (delivery, order, service)",
    "label.date.other_role": "the issue date copied as the due date, or the reverse",
    "label.issue_date.no_label": "no issue label proves the date, and it is not the only one",
    "label.due_date.no_label": "no due label proves the date",
    "label.due_date.left_out": "the page prints a due date under a due label; none given",
    "label.due_date.payment_sentence": "a due date left out where a payment sentence prints a date",
    "grounding.date_unreadable": "the printed date does not read as a date",
    "grounding.date_ambiguous": "the printed date reads as several dates",
    # payment terms
    "terms.not_stated_alone": "a payment term the page does not state alone",
    "terms.due_date_printed": "a term where the page prints a due date",
    "terms.issue_date_ungrounded": "a term counts from an issue date that is not grounded",
    "terms.left_out": "the page states a payment term; no due date given",
    # line items and tax lines
    "items.none_listed": "the answer lists no line items",
    "items.no_tax_rate": "the item's row prints no rate and the invoice has several",
    "items.not_on_row": "the item is on no row that reads as quantity x price = amount",
    "items.description_continues": "the description may go on below its row",
    "items.description_role": (
        "the description is another part of its row: under another column, a number's "
        "label, or running text's price wording"
    ),
    "documents.ocr_unverified": "a value OCR read without certainty is checked by a reviewer",
    "documents.ocr_bare_proven": (
        "a word OCR read bare whose twin is accented: no ink where the twin's marks are"
    ),
    "einvoice.not_holdable": "the e-invoice's XML states what contract v2 cannot hold",
    "einvoice.invalid": "the e-invoice's XML does not parse or is no CII or UBL invoice",
    "einvoice.schema": "the e-invoice's XML does not validate against its official XML schema",
    "einvoice.rules": "the e-invoice's XML fails a fatal EN 16931 business rule (Schematron)",
    "einvoice.xml_text_mismatch": "the page does not print what the embedded XML states",
    "einvoice.payee_account_not_iban": "the XML's account to pay (BT-84) is an IBAN",
    "items.description_shape": "the description is not printed like the table's others",
    "roles.symmetric_factors": "quantity and unit price multiply to the amount either way",
    "tax_lines.no_tax_row": "the cited line prints no rate, base and tax amount",
    # the totals' constraint step: values changed where certain
    "totals.copied.net": "the net total copied from another amount, replaced",
    "totals.copied.tax": "the tax total copied from another amount, replaced",
    "totals.copied.gross": "the gross total copied from a total or a tax line's amount, replaced",
    "totals.copied.net_and_tax": "the net and tax totals copied (from the gross), replaced",
    "totals.copied.tax_and_gross": "the tax and gross totals written one field late, replaced",
    "totals.exchanged.net_tax": "the net and tax totals written in each other's fields",
    "totals.exchanged.net_gross": "the net and gross totals written in each other's fields",
    "totals.exchanged.tax_gross": "the tax and gross totals written in each other's fields",
    "totals.amount_due_differs": "the page prints an amount to pay other than the gross total",
    # a reviewer's correction
    "correction.not_printed": "the corrected value is not printed in the document",
    "correction.row_not_printed": "the corrected row is printed on no row of the document",
    # the validator's checks
    "validation.missing_field": "a field the policy requires is null or empty",
    "validation.credit_note_title": "a page titled as a credit note or correction is read as one",
    "validation.correction_title": "a page titled as a corrected invoice is read as a correction",
    "credit_notes.reference_unknown": "the credited invoice is a delivered invoice of the tenant",
    "credit_notes.reference_ambiguous": "the credited invoice is one invoice of the tenant",
    "validation.model_uncertain": "the model marked the field as uncertain",
    "validation.line_amount_mismatch": "quantity x unit price = line amount",
    "validation.net_total_mismatch": "the line amounts sum to the net total",
    "validation.tax_rate_repeated": "one tax line per rate",
    "validation.tax_line_mismatch": "base x rate = tax amount on each tax line",
    "validation.tax_base_mismatch": "the lines at a rate sum to that tax line's base",
    "validation.tax_line_missing": "every rate of the line items has a tax line",
    "validation.tax_total_mismatch": "the tax lines sum to the tax total",
    "validation.gross_total_mismatch": "net total + tax total = gross total",
    "validation.amount_due_mismatch": "gross total - prepaid + rounding = amount due",
    "validation.contract_v3_required": "a v1 job's result holds no v3 value it would misread",
    "validation.currency_not_iso4217": "the currency is an ISO 4217 code",
    "validation.currency_not_permitted": "the tenant accepts the currency",
    "validation.currency_mixed": "the invoice is priced in one currency",
    "validation.bidi_control": "no bidirectional control characters in a value or its span",
    "validation.invisible_character": "no invisible format characters in a value",
    "validation.supplier_mixed_script": "the supplier's name is written in one script",
    "validation.supplier_confusable": "the supplier's name renders like another on file",
    "validation.supplier_unknown": "the supplier is in the master data",
    "validation.vat_id_mismatch": "the VAT id is the supplier's on file",
    "validation.tax_number_mismatch": "the tax number is the supplier's on file",
    "validation.supplier_unidentified": "a supplier stated without VAT id or tax number "
    "(not subject to VAT) is proven by an IBAN on file for it",
    "validation.iban_checksum": "the IBAN passes mod-97",
    "validation.iban_length": "the IBAN has its country's length",
    "validation.iban_not_in_text": "the IBAN is printed in the document",
    "validation.iban_not_registered": "the IBAN is on file for the supplier",
    "validation.payee_account_not_registered": "the national account to pay (a bankgiro) "
    "is on file for the supplier",
    "validation.iban_absent": "an invoice without IBAN prints none (no IBAN-shaped string, "
    "no IBAN label): the ERP pays the supplier's account on file",
    "validation.payee_account_not_iban": "an invoice without IBAN prints no other account "
    "to pay (bankgiro, account number, BIC...)",
    "validation.evidence_out_of_range": "the evidence span lies inside the document",
    "validation.evidence_quote_mismatch": "the evidence quote is the text at its span",
    "validation.evidence_value_mismatch": "the text at the span shows the value",
    "validation.evidence_duplicate": "no two line items cite the same row",
    "validation.issue_date_future": "the issue date is not after today",
    "validation.issue_date_old": "the issue date is within the policy's age",
    "validation.due_before_issue": "the due date is not before the issue date",
    "validation.payment_term_long": "the payment term is within the policy's maximum",
}
