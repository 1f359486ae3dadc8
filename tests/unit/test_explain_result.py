"""explain's result section (pipeline/jobs/explain_result.py) over results the e-invoice
path really produces: a page that disagrees with its XML shows ``xml_text_mismatch``
naming the fields, every value its XML path, and the reading says XML, 0 tokens, no model
call; a model-read result is not called an XML read."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pipeline.documents import pdf_attachments, read_pdf_text
from pipeline.invoice import SupplierRecord, TenantMasterData
from pipeline.jobs.explain_result import result_lines, result_section
from pipeline.worker.interpretation import interpret_einvoice

DATA = Path(__file__).resolve().parents[1] / "data" / "einvoices"
ATTEMPT = {"engine": "cii-xml/1", "prompt_tokens": 0, "completion_tokens": 0}


def _stored(forged: bool) -> dict[str, object]:
    data = (DATA / "XRECHNUNG_Einfach.pdf").read_bytes()
    ((_, xml),) = pdf_attachments(data).items()
    page = "\f".join(p.laid_out().text for p in read_pdf_text(data, max_pages=5).pages)
    if forged:
        assert "529,87" in page
        page = page.replace("529,87", "592,87")
    master = TenantMasterData(
        (SupplierRecord("Lieferant GmbH", "DE123456789", frozenset({"DE02120300000000202051"})),),
        frozenset({"EUR"}),
    )
    outcome = interpret_einvoice(
        xml, master, schema_version=3, today=date(2018, 3, 15), page_text=page
    )
    report = outcome.report.as_dict()
    return {"result": outcome.result(), "validation": report, "decision": report["decision"]}


def test_a_page_that_disagrees_with_its_xml_is_explained_with_the_fields_it_names() -> None:
    section = result_section(_stored(forged=True), [ATTEMPT], [])
    assert section is not None
    assert (section["decision"], section["read_from"]) == ("REVIEW_REQUIRED", "xml")
    assert [(r["code"], r["field"]) for r in section["reasons"]] == [
        ("xml_text_mismatch", "gross_total")
    ]
    lines = result_lines(section)
    assert lines[0] == (
        "result: REVIEW_REQUIRED, read from the e-invoice's XML by cii-xml/1:"
        " tokens in/out 0/0, no model call"
    )
    assert any(line.startswith("  reason xml_text_mismatch@gross_total: ") for line in lines)
    assert (
        "  invoice_number = '471102'  <- xml /rsm:CrossIndustryInvoice/rsm:ExchangedDocument/ram:ID"
        in lines
    )
    tax_number = next(line for line in lines if line.startswith("  supplier.tax_number = "))
    assert tax_number.startswith("  supplier.tax_number = '201/113/40209'  <- xml /rsm:")
    assert tax_number.endswith("/ram:SellerTradeParty/ram:SpecifiedTaxRegistration[1]/ram:ID")
    assert result_section(_stored(forged=False), [ATTEMPT], [])["reasons"] == []  # type: ignore[index]


def test_a_result_read_from_the_text_is_not_called_an_xml_read() -> None:
    evidence = {"page": 1, "start": 10, "end": 16, "quote": "471102", "match": "exact"}
    stored = {
        "result": {"invoice_number": {"value": "471102", "evidence": evidence}},
        "validation": {"decision": "SUCCEEDED", "reasons": []},
        "decision": "SUCCEEDED",
    }
    attempt = {"engine": "vllm:short", "prompt_tokens": 900, "completion_tokens": 120}
    section = result_section(stored, [attempt], [{"id": "g"}])
    assert section is not None and section["read_from"] == "text"
    assert result_lines(section) == [
        "result: SUCCEEDED, read from the document's text by vllm:short: tokens in/out 900/120,"
        " 1 model call(s) admitted",
        "  invoice_number = '471102'  <- page 1 [10:16] '471102' (exact)",
    ]
    assert result_lines(result_section(None, [], [])) == ["result: none"]


def test_a_credit_note_is_explained_as_one_with_the_invoice_it_credits() -> None:
    xml = (DATA / "credit_notes" / "BIS_Billing_30-Kreditering_med_kreditnota.xml").read_bytes()
    outcome = interpret_einvoice(
        xml, TenantMasterData(()), schema_version=3, today=date(2018, 2, 11)
    )
    report = outcome.report.as_dict()
    stored = {"result": outcome.result(), "validation": report, "decision": report["decision"]}
    attempt = {"engine": "ubl-xml/1", "prompt_tokens": 0, "completion_tokens": 0}
    section = result_section(stored, [attempt], [])
    assert section is not None and section["document_type"] == "credit_note"
    lines = result_lines(section)
    assert lines[0].startswith("result: REVIEW_REQUIRED (credit note), read from the e-invoice's")
    assert (
        "  preceding_invoice = '2018133'  <- xml"
        " /ubl:CreditNote/cac:BillingReference/cac:InvoiceDocumentReference/cbc:ID" in lines
    )


def test_a_description_the_page_image_proved_bare_is_explained_by_its_rule() -> None:
    proof = {
        "field": "line_items[0].description",
        "rule": "documents.ocr_bare_proven",
        "detail": "read bare, listed with an accented twin (fra), no ink where the twin"
        " is marked: de",
    }
    stored = {
        "result": {},
        "validation": {"decision": "SUCCEEDED", "reasons": [], "proofs": [proof]},
        "decision": "SUCCEEDED",
    }
    section = result_section(stored, [{"engine": "oracle"}], [])
    assert section is not None and section["proofs"] == [proof]
    assert result_lines(section)[-1] == (
        "  proven line_items[0].description (documents.ocr_bare_proven): read bare, listed"
        " with an accented twin (fra), no ink where the twin is marked: de"
    )
