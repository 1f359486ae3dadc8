"""Documents as files: where their bytes live and how they are read.

Object references and the stores behind them (the embedded content-addressed folder,
the S3 API), media-type sniffing from the bytes with its limits, and the text layer
of PDFs, OCR of scans, photos and PDF pages without text (tesseract), and
:func:`read_document`, which reads any of them into pages of text and words. For the
review console: a page as a PNG, its words at the kept text's offsets, and a span's
rectangles on the page. Later here: the ``Layout`` type, the e-invoice XML readers.

It sits above the root foundation and ``pipeline.invoice`` and below extraction,
which reads what this package produces. This is the package's surface: other
packages import these names from here, never from a module inside.
"""

from pipeline.documents.document_text import (
    DocumentPage,
    DocumentText,
    DocumentWord,
    PageInput,
    PageOcr,
    PageStream,
    TenantOcr,
    pages_behind,
    read_document,
)
from pipeline.documents.evidence_boxes import Rect, span_rects
from pipeline.documents.folder_store import FolderStore
from pipeline.documents.ocr import (
    OcrLine,
    OcrPage,
    OcrWord,
    PixelBox,
    ocr_images,
    ocr_languages,
)
from pipeline.documents.ocr_lexicon import OTHER as OTHER_MARK
from pipeline.documents.ocr_lexicon import OcrLexicon, ocr_lexicon, strip_accents
from pipeline.documents.ocr_marks import CLEAR, INK
from pipeline.documents.ocr_marks import above as mark_above
from pipeline.documents.ocr_marks import below as mark_below
from pipeline.documents.page_png import page_png
from pipeline.documents.page_words import (
    READABLE_WORDS_VERSIONS,
    WORDS_VERSION,
    kept_page_words,
    kept_turns,
    kept_words,
    words_to_keep,
)
from pipeline.documents.pdf_text import (
    Box,
    PdfPage,
    PdfText,
    PdfWord,
    pdf_attachments,
    pdf_page_count,
    read_pdf_text,
)
from pipeline.documents.s3_store import S3Store
from pipeline.documents.sniff import MediaType, sniff_media_type
from pipeline.documents.store import (
    DocumentRef,
    DocumentStore,
    StoredObject,
    is_sha256_hex,
    sha256_hex,
)
from pipeline.documents.stores import open_document_store
from pipeline.documents.tesseract import (
    MAX_REQUESTED_LANGUAGES,
    installed_languages,
    requested_languages,
)

__all__ = [
    "CLEAR",
    "INK",
    "MAX_REQUESTED_LANGUAGES",
    "OTHER_MARK",
    "READABLE_WORDS_VERSIONS",
    "WORDS_VERSION",
    "Box",
    "DocumentPage",
    "DocumentRef",
    "DocumentStore",
    "DocumentText",
    "DocumentWord",
    "FolderStore",
    "MediaType",
    "OcrLexicon",
    "OcrLine",
    "OcrPage",
    "OcrWord",
    "PageInput",
    "PageOcr",
    "PageStream",
    "PdfPage",
    "PdfText",
    "PdfWord",
    "PixelBox",
    "Rect",
    "S3Store",
    "StoredObject",
    "TenantOcr",
    "installed_languages",
    "is_sha256_hex",
    "kept_page_words",
    "kept_turns",
    "kept_words",
    "mark_above",
    "mark_below",
    "ocr_images",
    "ocr_languages",
    "ocr_lexicon",
    "open_document_store",
    "page_png",
    "pages_behind",
    "pdf_attachments",
    "pdf_page_count",
    "read_document",
    "read_pdf_text",
    "requested_languages",
    "sha256_hex",
    "sniff_media_type",
    "span_rects",
    "strip_accents",
    "words_to_keep",
]
