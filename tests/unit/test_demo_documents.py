"""The demo sends an e-invoice, a PDF and a scan among its eight (issues 43, 44),
uploaded as files.

The e-invoice is a clean invoice's truth as CII XML, which the worker's fast path must
read field for field and accept; the PDF is a clean invoice whose text layer must read
back as its text (so the model sees the page it saw as pasted text); the scan is the
invoice a cent off, which must go to review. Submission is checked against a stand-in
intake (no cluster).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from benchmarks.demo import run as demo_run
from benchmarks.demo.corpus import DemoOptions, corpus
from benchmarks.demo.documents import demo_documents
from benchmarks.invoices.generator import Variant
from pipeline.documents import MediaType, read_document, sniff_media_type
from pipeline.invoice import Extraction
from pipeline.settings import Settings
from pipeline.validation import Decision
from pipeline.worker.interpretation import interpret_einvoice

WORK = corpus(DemoOptions())
DOCUMENTS = demo_documents(WORK)


def test_one_clean_pdf_and_the_cent_off_as_a_scan_among_the_eight() -> None:
    kinds = [d.kind for d in DOCUMENTS]
    assert kinds == ["text", "xml", "text", "scan", "pdf", "text", "text", "text"]
    scan_invoice, pdf_invoice = WORK[3][1], WORK[4][1]
    assert WORK[1][1].variant is Variant.CLEAN
    assert scan_invoice.variant is Variant.ARITHMETIC_OFF_BY_CENT
    assert scan_invoice.truth_decision.value == "REVIEW_REQUIRED"
    assert pdf_invoice.variant is Variant.CLEAN
    assert pdf_invoice.truth_decision.value == "SUCCEEDED"
    # Six of eight still expected to be accepted and posted once.
    assert [inv.truth_decision.value for _, inv in WORK].count("SUCCEEDED") == 6


def test_the_pdf_reads_back_as_the_text_the_demo_pasted_before() -> None:
    pdf, invoice = DOCUMENTS[4], WORK[4][1]
    assert pdf.data is not None and pdf.filename == "invoice-4.pdf"
    assert sniff_media_type(pdf.data, max_bytes=1 << 30) is MediaType.PDF
    document = read_document(pdf.data, MediaType.PDF, Settings())
    assert document.ocr_pages == ()
    assert document.text == invoice.ocr_text.rstrip("\n")


def test_the_e_invoice_is_read_without_a_model_field_for_field_and_accepted() -> None:
    """What the worker does with an XML upload: no page, the XML is its e-invoice
    (:func:`~pipeline.worker.interpretation.interpret_einvoice`)."""
    doc, invoice = DOCUMENTS[1], WORK[1][1]
    assert doc.data is not None and doc.filename == "invoice-1.xml"
    assert sniff_media_type(doc.data, max_bytes=1 << 30) is MediaType.XML
    assert doc.content_type == MediaType.XML.value
    outcome = interpret_einvoice(
        doc.data, invoice.master_data, schema_version=1, today=invoice.today, page_text=None
    )
    assert outcome.report.decision is Decision.SUCCEEDED, outcome.report.as_dict()
    assert outcome.report.decision is invoice.truth_decision
    got, truth = outcome.extraction, invoice.truth

    def values(e: Extraction) -> dict[str, Any]:
        header = {
            name: getattr(e, name) and getattr(e, name).value
            for name in (
                "invoice_number", "issue_date", "due_date", "currency", "net_total",
                "tax_total", "gross_total", "iban",
            )
        }  # fmt: skip
        return {
            **header,
            "supplier": (e.supplier.name and e.supplier.name.value,
                         e.supplier.vat_id and e.supplier.vat_id.value),
            "items": [(i.description, i.quantity, i.unit_price, i.line_amount, i.tax_rate)
                      for i in e.line_items],
            "taxes": [(t.rate, t.base, t.amount) for t in e.tax_lines],
        }  # fmt: skip

    assert values(got) == values(truth)
    assert got.gross_total is not None and got.gross_total.evidence.match == "xml"


def test_the_scan_is_an_image_of_the_type_it_is_sent_as() -> None:
    scan = DOCUMENTS[3]
    assert scan.data is not None and scan.filename.startswith("invoice-3.")
    media = sniff_media_type(scan.data, max_bytes=Settings().max_document_file_bytes)
    assert media.value == scan.content_type
    assert media in (MediaType.PNG, MediaType.JPEG, MediaType.TIFF)
    assert "dpi" in scan.detail


async def test_files_are_uploaded_as_multipart_and_text_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[httpx.Request] = []

    def intake(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={"job_id": f"job-{len(seen)}"})

    real = httpx.AsyncClient

    def client(**kw: Any) -> httpx.AsyncClient:
        return real(transport=httpx.MockTransport(intake), **kw)

    monkeypatch.setattr("benchmarks.demo.run.httpx.AsyncClient", client)
    keys = {tenant: f"key-{tenant}" for tenant, _ in WORK}
    accepted = await demo_run._submit("http://intake", keys, WORK, DOCUMENTS)
    assert [a["document"] for a in accepted] == [d.kind for d in DOCUMENTS]
    for request, doc, (tenant, invoice) in zip(seen, DOCUMENTS, WORK, strict=True):
        assert request.headers["Authorization"] == f"Bearer key-{tenant}"
        content_type = request.headers["Content-Type"]
        body = request.read()
        if doc.data is None:
            assert content_type == "application/json"
            assert json.loads(body)["document"]["text"] == invoice.ocr_text
        else:
            assert content_type.startswith("multipart/form-data; boundary=")
            assert doc.data in body
            assert f'name="document"; filename="{doc.filename}"'.encode() in body
            assert f"Content-Type: {doc.content_type}".encode() in body
