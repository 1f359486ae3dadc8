"""The document stage on its own: a documents row in, the text extraction's input out,
against a real folder store in a temporary folder."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from benchmarks.invoices.generator import generate_invoice
from pipeline.documents import FolderStore, StoredObject
from pipeline.errors import (
    DocumentChanged,
    DocumentMissing,
    DocumentOverLimit,
    DocumentRefused,
    DocumentStoreUnavailable,
)
from pipeline.extraction import answer_for
from pipeline.invoice import ReasonCode
from pipeline.validation import Decision
from pipeline.worker import interpret
from pipeline.worker.document_stage import OCR_READER, DocumentStage
from tests.support.pdfs import blank_pdf, text_pdf, tiny_png
from tests.support.scans import encode, render_text, word_recall

TENANT = uuid.UUID(int=1)


def _row(stored: StoredObject | None, media: str, content: str | None = None) -> dict[str, Any]:
    return {
        "content": content,
        "content_type": media,
        "uri": stored.uri if stored else None,
        "version": stored.version if stored else None,
        "sha256": stored.sha256 if stored else "0" * 64,
    }


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    return FolderStore(tmp_path / "documents")


async def test_a_pasted_text_is_read_from_its_row_without_a_store() -> None:
    read = await DocumentStage(None, max_pages=10).read(_row(None, "text/plain", "INVOICE 1"))
    assert (read.text, read.media_type, read.pages) == ("INVOICE 1", "text/plain", None)


async def test_a_pdf_becomes_its_pages_joined_by_form_feeds(store: FolderStore) -> None:
    stored = await store.put(TENANT, text_pdf("Invoice 42\nTotal 10.00 EUR\fPage two"), "pdf")
    read = await DocumentStage(store, max_pages=10).read(_row(stored, "application/pdf"))
    assert read.text == "Invoice 42\nTotal 10.00 EUR\fPage two"
    assert (read.pages, read.pages_without_text) == (2, ())


@pytest.mark.parametrize(
    ("data", "media", "reason"),
    [
        (tiny_png(), "image/png", "no_text_found"),
        (blank_pdf(2), "application/pdf", "no_text_found"),
        (b"%PDF-1.7\n" + b"\x00" * 64, "application/pdf", "unreadable_document"),
    ],
    ids=["png", "pdf-without-text", "broken-pdf"],
)
async def test_what_no_stage_can_read_is_refused_by_name(
    store: FolderStore, data: bytes, media: str, reason: str
) -> None:
    stored = await store.put(TENANT, data, media)
    with pytest.raises(DocumentRefused) as refused:
        await DocumentStage(store, max_pages=10).read(_row(stored, media))
    assert refused.value.error_class == reason


async def test_a_pdf_over_the_page_limit_is_refused(store: FolderStore) -> None:
    stored = await store.put(TENANT, text_pdf("one\ftwo\fthree"), "application/pdf")
    with pytest.raises(DocumentOverLimit) as over:
        await DocumentStage(store, max_pages=2).read(_row(stored, "application/pdf"))
    assert (over.value.limit, over.value.actual) == ("pages", 3)


async def test_changed_missing_and_unavailable_bytes(store: FolderStore) -> None:
    data = text_pdf("Invoice 7")
    stored = await store.put(TENANT, data, "application/pdf")
    path = store.path_for(stored.sha256)
    path.chmod(0o644)
    path.write_bytes(data + b"%")
    stage = DocumentStage(store, max_pages=10)
    with pytest.raises(DocumentChanged):
        await stage.read(_row(stored, "application/pdf"))
    path.unlink()
    with pytest.raises(DocumentMissing):
        await stage.read(_row(stored, "application/pdf"))
    with pytest.raises(DocumentStoreUnavailable):
        await DocumentStage(None, max_pages=10).read(_row(stored, "application/pdf"))


@pytest.mark.ocr
async def test_a_scan_is_read_by_ocr_and_says_so(store: FolderStore) -> None:
    page = "RECHNUNG Nr. RE-2024-0815\n\nNettobetrag       100,00 EUR\nGesamtbetrag      119,00 EUR"
    stored = await store.put(TENANT, encode(render_text(page)), "image/png")
    read = await DocumentStage(store, max_pages=10).read(_row(stored, "image/png"))
    assert "RE-2024-0815" in read.text and "119,00" in read.text
    assert (read.pages, read.ocr_pages, read.derived_by, read.by_ocr) == (1, (1,), OCR_READER, True)
    assert word_recall(page, read.text) >= 0.8


def test_a_text_read_by_ocr_without_confidences_goes_to_review_however_well_it_grounds() -> None:
    """OCR's misread characters ground as printed ("Konsulttjanster" for
    "Konsulttjänster" was accepted on two of 20 scanned generated invoices with perfect
    answers): without the words' confidences no value can be proven, and a reviewer
    compares the page (with them: tests/unit/test_ocr_proof.py)."""
    inv = generate_invoice(9, languages=("en",), max_line_items=3)
    answer = answer_for(inv.candidate, inv.ocr_text)
    master = inv.master_data
    plain = interpret(answer, inv.ocr_text, master, today=inv.today)
    scanned = interpret(answer, inv.ocr_text, master, today=inv.today, read_by_ocr=True)
    assert plain.report.decision is Decision.SUCCEEDED
    assert scanned.report.decision is Decision.REVIEW_REQUIRED
    assert [(r.code, r.field, r.rule) for r in scanned.report.reasons] == [
        (ReasonCode.OCR_UNVERIFIED, "document", "documents.ocr_unverified")
    ]
