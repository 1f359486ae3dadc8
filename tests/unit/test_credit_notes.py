"""Credit notes (issue 47 item 2, issue 44): the document type from the XML's root and
type code, EN 16931's sign rules, the preceding invoice read with its evidence, no IBAN
required of a credit, and a page titled as a credit note never accepted as an invoice.

The files are vendored corpus samples (tests/data/einvoices, see the NOTICE files):
CEN's UBL credit note ``ubl-tc434-creditnote1``, Peppol's crediting pair (invoice
2018133 and the CreditNote 2018140 that credits it), and the Factur-X BASIC ``Avoir``
(CII 381) with its page.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from pipeline.documents import pdf_attachments, read_pdf_text
from pipeline.extraction import obstacles, read_einvoice
from pipeline.extraction.ubl import read_ubl
from pipeline.invoice import CONTRACT_V3, ReasonCode, SupplierRecord, TenantMasterData
from pipeline.jobs.versions import CORRECTION_TITLE_RULE, amendment_marker
from pipeline.validation import Decision, validate
from pipeline.validation.document_title import printed_title
from pipeline.worker.interpretation import interpret_einvoice

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
CREDIT_NOTE = DATA / "ubl" / "ubl-tc434-creditnote1.xml"
PAIR_INVOICE = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_urspr_faktura.xml"
PAIR_CREDIT = DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml"
AVOIR = DATA / "Avoir_FR_type381_BASIC.pdf"

_MASTER = TenantMasterData(
    suppliers=(
        SupplierRecord("My Supplier Company", "BE0000000196", frozenset({"BE91000000143476"})),
    ),
    permitted_currencies=frozenset({"EUR"}),
)
_DAY = date(2019, 9, 24)  # the day after creditnote1's issue


def test_the_document_type_comes_from_the_root_and_the_type_code() -> None:
    credit = read_einvoice(CREDIT_NOTE.read_bytes())
    assert credit.extraction.document_type == "credit_note"
    invoice = read_einvoice(PAIR_INVOICE.read_bytes())
    assert invoice.extraction.document_type == "invoice"
    # A UBL Invoice whose type code says 381 is a credit note; 384 a corrected invoice,
    # which the reader reviews (what it replaces is not modelled).
    xml = PAIR_INVOICE.read_bytes()
    typed = xml.replace(b"<cbc:InvoiceTypeCode>380<", b"<cbc:InvoiceTypeCode>381<")
    assert typed != xml
    assert read_einvoice(typed).extraction.document_type == "credit_note"
    corrected = xml.replace(b"<cbc:InvoiceTypeCode>380<", b"<cbc:InvoiceTypeCode>384<")
    reading = read_einvoice(corrected)
    assert reading.extraction.document_type == "corrective_invoice"
    assert "document_type" in {r.detail.split(":")[0] for r in reading.reasons}


def test_a_credit_note_states_positive_amounts_and_is_accepted_as_a_credit() -> None:
    """EN 16931: a credit note's amounts are positive, its type says they are the
    buyer's. Read from the XML it is SUCCEEDED as a credit note (contract v3)."""
    got = interpret_einvoice(CREDIT_NOTE.read_bytes(), _MASTER, schema_version=3, today=_DAY)
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    assert got.contract == CONTRACT_V3
    result = got.result()
    assert result["document_type"] == "credit_note"
    assert result["gross_total"]["value"] == "100.11"


@pytest.mark.parametrize(
    ("path", "replace", "expected"),
    [
        # A credit note with negative totals is a debit: reviewed, never read as a credit.
        (CREDIT_NOTE, (b">100.11</cbc:TaxInclusiveAmount", b">-100.11</cbc:TaxInclusiveAmount"),
         "negative totals on document type 381 (a debit)"),
        # An invoice with negative totals is a credit in disguise: reviewed.
        (PAIR_INVOICE, (b">10835</cbc:TaxInclusiveAmount", b">-10835</cbc:TaxInclusiveAmount"),
         "negative totals on document type 380 (a correction or credit)"),
    ],
)  # fmt: skip
def test_negative_totals_are_reviewed_on_either_type(
    path: Path, replace: tuple[bytes, bytes], expected: str
) -> None:
    xml = path.read_bytes()
    planted = xml.replace(*replace)
    assert planted != xml
    details = [r.detail for r in read_einvoice(planted).reasons]
    assert f"negative_amounts: {expected}" in details


def test_the_model_path_holds_no_credit_note() -> None:
    """Contract v2 (a model's answer, the text path's holdability) has no document type:
    a credit note stays an obstacle there."""
    facts = read_ubl(CREDIT_NOTE.read_bytes())
    assert [o.code for o in obstacles(facts)] == ["credit_note"]
    assert [o.code for o in obstacles(facts, v3=True)] == []


def test_the_preceding_invoice_is_read_with_its_evidence() -> None:
    e = read_einvoice(PAIR_CREDIT.read_bytes()).extraction
    assert e.document_type == "credit_note"
    assert e.preceding_invoice is not None
    assert (e.preceding_invoice.number, e.preceding_invoice.issue_date) == (
        "2018133",
        date(2018, 2, 8),
    )
    assert e.preceding_invoice.evidence.match == "xml"
    assert e.preceding_invoice.evidence.quote == (
        "/ubl:CreditNote/cac:BillingReference/cac:InvoiceDocumentReference/cbc:ID"
    )
    dumped = e.model_dump(mode="json")["preceding_invoice"]
    assert (dumped["number"], dumped["issue_date"]) == ("2018133", "2018-02-08")


def test_a_cii_credit_note_names_its_preceding_invoice() -> None:
    ((_, xml),) = pdf_attachments(AVOIR.read_bytes()).items()
    e = read_einvoice(xml).extraction
    assert e.document_type == "credit_note"
    assert e.preceding_invoice is not None
    assert (e.preceding_invoice.number, e.preceding_invoice.issue_date) == (
        "FA-2017-0010",
        date(2017, 11, 13),
    )
    assert e.preceding_invoice.evidence.quote.endswith(
        "/ram:ApplicableHeaderTradeSettlement/ram:InvoiceReferencedDocument/ram:IssuerAssignedID"
    )


def test_a_credit_note_of_several_invoices_is_reviewed() -> None:
    xml = PAIR_CREDIT.read_bytes()
    ref = (
        b"<cac:BillingReference>\n\t\t<!-- Reference to the initial invoice is required for"
        b" bookkeeping: -->\n"
    )
    assert ref in xml
    second = (
        b"<cac:BillingReference><cac:InvoiceDocumentReference><cbc:ID>2018134</cbc:ID>"
        b"</cac:InvoiceDocumentReference></cac:BillingReference>\n\t" + ref
    )
    reading = read_einvoice(xml.replace(ref, second))
    assert [r.field for r in reading.reasons if r.detail.startswith("preceding_invoices")] == [
        "preceding_invoice"
    ]


def test_a_credit_note_needs_no_iban_and_an_invoice_stating_one_does() -> None:
    xml = CREDIT_NOTE.read_bytes()
    no_account = xml.replace(b"<cbc:ID>BE91000000143476</cbc:ID>", b"<cbc:ID>0143476</cbc:ID>")
    assert no_account != xml
    got = interpret_einvoice(no_account, _MASTER, schema_version=3, today=_DAY)
    assert got.extraction.iban is None
    assert got.report.decision is Decision.SUCCEEDED, got.report.reasons
    as_invoice = got.extraction.model_copy(update={"document_type": "invoice"})
    # an invoice whose text states an IBAN the result does not hold
    report = validate(as_invoice, "100.11 EUR\nBE91000000143476", _MASTER, today=_DAY)
    assert (ReasonCode.MISSING_FIELD, "iban") in {(r.code, r.field) for r in report.reasons}
    # and one stating an account that is no IBAN (read from its XML)
    invoice = no_account.replace(b"<cbc:CreditNoteTypeCode>381<", b"<cbc:CreditNoteTypeCode>380<")
    assert invoice != no_account
    got = interpret_einvoice(invoice, _MASTER, schema_version=3, today=_DAY)
    assert (ReasonCode.PAYEE_ACCOUNT_NOT_IBAN, "iban") in {
        (r.code, r.field) for r in got.report.reasons
    }


# --- the text path: a page titled as a credit note -------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Gutschrift", "GUTSCHRIFT Nr. 2019-17", "Credit note", "Credit Note No. CN-0042",
        "CREDIT NOTE: 4711", "Avoir AV-2017-0005", "AVOIR N° 45", "Nota di credito n. 12",
        "Creditnota 2024-001", "Rechnungskorrektur Nr. 5", "Facture d'avoir", "  Kreditnota #9",
        "  Rechnungskorrektur (384) Nr. RK21012345 vom 16.09.2018",
    ],
)  # fmt: skip
def test_credit_note_titles_are_recognised(line: str) -> None:
    assert printed_title(f"Acme GmbH\nMusterstr. 1\n{line}\nDatum: 01.02.2024") is not None


@pytest.mark.parametrize(
    "line",
    [
        "Der Betrag wird Ihnen als Gutschrift verrechnet.", "sans avoir à payer",
        "Invoice No. 2024-001", "Rechnung Nr. 17", "Credit card: VISA", "Gutschriften bis 31.12.",
    ],
)  # fmt: skip
def test_words_inside_sentences_are_no_title(line: str) -> None:
    assert printed_title(f"Acme GmbH\n{line}\n") is None


@pytest.fixture(scope="module")
def inv() -> GeneratedInvoice:
    return generate_invoice(3)


def test_a_page_titled_credit_note_is_never_accepted_as_an_invoice(inv: GeneratedInvoice) -> None:
    plain = validate(inv.truth, inv.ocr_text, inv.master_data, today=inv.today)
    assert plain.decision is Decision.SUCCEEDED, plain.reasons
    # The same page with a credit note's title below (offsets of every value unchanged).
    titled = inv.ocr_text + "\nGutschrift Nr. 17"
    report = validate(inv.truth, titled, inv.master_data, today=inv.today)
    assert report.decision is Decision.REVIEW_REQUIRED
    assert [(r.code, r.field) for r in report.reasons] == [
        (ReasonCode.CREDIT_NOTE_UNSUPPORTED_ON_TEXT, "document_type")
    ]
    assert "'Gutschrift Nr. 17'" in report.reasons[0].detail
    assert report.reasons[0].rule == "validation.credit_note_title"
    # A credit note its XML states prints its title: that is no reason.
    credit = inv.truth.model_copy(update={"document_type": "credit_note"})
    assert validate(credit, titled, inv.master_data, today=inv.today).reasons == ()


@pytest.mark.parametrize(
    ("title", "rule"),
    [
        ("Rechnungskorrektur Nr. 5", "validation.correction_title"),
        ("CORRECTED   INVOICE No. 17", "validation.correction_title"),
        ("Facture rectificative N° 3", "validation.correction_title"),
        ("Gutschrift Nr. 17", "validation.credit_note_title"),
        ("Stornorechnung 4", "validation.credit_note_title"),
    ],
)
def test_a_corrected_invoices_title_has_its_own_rule_the_version_step_reads(
    inv: GeneratedInvoice, title: str, rule: str
) -> None:
    report = validate(inv.truth, f"{inv.ocr_text}\n{title}", inv.master_data, today=inv.today)
    [reason] = report.reasons
    assert (reason.code, reason.rule) == (ReasonCode.CREDIT_NOTE_UNSUPPORTED_ON_TEXT, rule)
    marker = amendment_marker(inv.truth.model_dump(mode="json"), report.as_dict())
    assert marker == ("printed_correction_title" if rule == CORRECTION_TITLE_RULE else None)


def test_a_factur_x_credit_note_with_its_page_is_read_as_a_credit_note() -> None:
    """The Avoir's page is titled "Avoir AV-2017-0005": its XML says 381, so the title
    agrees; read as an invoice (the model path), that page is reviewed."""
    data = AVOIR.read_bytes()
    ((_, xml),) = pdf_attachments(data).items()
    page = "\f".join(p.laid_out().text for p in read_pdf_text(data, max_pages=20).pages)
    assert printed_title(page) == "Avoir AV-2017-0005"
    reading = read_einvoice(xml, page)
    codes = {r.code for r in reading.reasons}
    assert ReasonCode.XML_TEXT_MISMATCH not in codes
    as_invoice = reading.extraction.model_copy(update={"document_type": "invoice"})
    report = validate(as_invoice, page, TenantMasterData(()), today=date(2017, 11, 17))
    assert ReasonCode.CREDIT_NOTE_UNSUPPORTED_ON_TEXT in {r.code for r in report.reasons}
