"""Documents as files: where their bytes live and how they are read.

Object references and the stores behind them (the embedded content-addressed folder,
the S3 API), media-type sniffing from the bytes with its limits, and the text layer
of PDFs. Later here: the ``Layout`` type, the OCR client, the e-invoice XML readers.

It sits above the root foundation and ``pipeline.invoice`` and below extraction,
which reads what this package produces. This is the package's surface: other
packages import these names from here, never from a module inside.
"""

from pipeline.documents.folder_store import FolderStore
from pipeline.documents.pdf_text import (
    Box,
    PdfPage,
    PdfText,
    PdfWord,
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

__all__ = [
    "Box",
    "DocumentRef",
    "DocumentStore",
    "FolderStore",
    "MediaType",
    "PdfPage",
    "PdfText",
    "PdfWord",
    "S3Store",
    "StoredObject",
    "is_sha256_hex",
    "open_document_store",
    "pdf_page_count",
    "read_pdf_text",
    "sha256_hex",
    "sniff_media_type",
]
