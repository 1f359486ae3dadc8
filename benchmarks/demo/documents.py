"""How the demo sends each invoice: pasted text, or a file uploaded as a user would.

Three of the default eight arrive as files, uploaded as ``multipart/form-data``: invoice
2 (seed 2027, clean) as an e-invoice, its truth written as CII XML (Factur-X EN 16931,
:mod:`benchmarks.invoices.einvoice`), which the worker reads without a model call;
invoice 4 (seed 2029, the total a cent off) as a scan of its printed page, read by OCR;
and invoice 5 (seed 2030, clean) as a PDF printed from its text, read from its text
layer (:mod:`benchmarks.invoices.files`). The e-invoice states what the page prints and
the PDF's text layer reads back as the invoice's text, so both must go through as the
text would; the scan must go to review, for the cent (``gross_total_mismatch``; values
OCR read without certainty add ``ocr_unverified``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.invoices.einvoice import cii_xml
from benchmarks.invoices.files import render_pdf, render_scan
from benchmarks.invoices.generator import GeneratedInvoice

#: Which invoices (0-based position) go as files, and as what; the rest as text.
DOCUMENT_KINDS = {1: "xml", 3: "scan", 4: "pdf"}
TEXT, PDF, SCAN, XML = "text", "pdf", "scan", "xml"
_CONTENT_TYPES = {"pdf": "application/pdf", "png": "image/png", "jpg": "image/jpeg"}


@dataclass(frozen=True)
class DemoDocument:
    """One invoice as the demo submits it. ``data`` is None for pasted text (the JSON
    body carries the text); ``detail`` says how a file was made."""

    kind: str
    filename: str
    data: bytes | None
    content_type: str
    detail: str


def demo_document(index: int, invoice: GeneratedInvoice) -> DemoDocument:
    """Invoice ``index`` (0-based) as the demo sends it (:data:`DOCUMENT_KINDS`)."""
    kind = DOCUMENT_KINDS.get(index, TEXT)
    name = f"invoice-{index}"
    if kind == XML:
        xml = cii_xml(invoice.truth)
        return DemoDocument(
            XML, f"{name}.xml", xml, "application/xml", f"an e-invoice, CII XML, {len(xml)} bytes"
        )
    if kind == PDF:
        pdf = render_pdf(invoice.ocr_text)
        return DemoDocument(
            PDF, f"{name}.pdf", pdf.data, "application/pdf", f"a PDF, {pdf.pages} page(s)"
        )
    if kind == SCAN:
        scan = render_scan(invoice.ocr_text, invoice.seed)
        s = scan.scan
        assert s is not None
        return DemoDocument(
            SCAN,
            f"{name}.{scan.suffix}",
            scan.data,
            _CONTENT_TYPES.get(scan.suffix, "image/tiff"),
            f"a scan, {s.format} at {s.dpi} dpi, skewed {s.skew:+.2f} deg, "
            f"JPEG quality {s.jpeg_quality}",
        )
    return DemoDocument(TEXT, f"{name}.txt", None, "text/plain", "text")


def demo_documents(work: Sequence[tuple[str, GeneratedInvoice]]) -> list[DemoDocument]:
    """Every demo invoice as it is sent, in order."""
    return [demo_document(i, invoice) for i, (_, invoice) in enumerate(work)]
