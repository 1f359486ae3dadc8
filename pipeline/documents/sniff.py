"""What a file is, read from its bytes: never from its name or a client's claim.

A filename and a ``Content-Type`` header are what the sender *says*; the first bytes
are what every later reader (PDFium, an image decoder, an XML parser) will act on.
So the media type is decided here, from magic numbers, and anything else is refused
with a named reason before it is stored or read.

Recognised: PDF (``%PDF-x.y`` within the first 1024 bytes, where readers look for
it), PNG, JPEG, TIFF (both byte orders), XML (with or without a byte-order mark,
an XML declaration, a comment or a root element first) and UTF-8 text (strictly
valid UTF-8 without control characters other than tab, line and page breaks). A
file that begins like one of the binary formats but stops before the signature is
complete is refused, never taken for text.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pipeline.errors import DocumentOverLimit, DocumentRefused


class MediaType(StrEnum):
    """The media types the document stage reads, as stored on a documents row."""

    PDF = "application/pdf"
    PNG = "image/png"
    JPEG = "image/jpeg"
    TIFF = "image/tiff"
    XML = "application/xml"
    TEXT = "text/plain"


#: Readers (PDFium, Acrobat) accept the header anywhere in the first 1024 bytes.
_PDF_HEADER = re.compile(rb"%PDF-\d\.\d")
_PDF_WINDOW = 1024
_SIGNATURES: tuple[tuple[bytes, MediaType], ...] = (
    (b"\x89PNG\r\n\x1a\n", MediaType.PNG),
    (b"\xff\xd8\xff", MediaType.JPEG),
    (b"II*\x00", MediaType.TIFF),  # little-endian
    (b"MM\x00*", MediaType.TIFF),  # big-endian
)
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
#: An XML document's first markup: a declaration, a comment, or a root element's name.
_XML_START = re.compile(r"\s*<(\?xml[\s?]|!--|[A-Za-z_][\w.:-]*[\s/>])")
_XML_PEEK = 256
#: Control characters a text document may hold: tab, line feed, vertical tab, form feed, CR.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def sniff_media_type(data: bytes, *, max_bytes: int) -> MediaType:
    """The media type of ``data``, from its bytes alone.

    Args:
        data: the whole file.
        max_bytes: the size limit (``Settings.max_document_file_bytes``).

    Raises:
        DocumentOverLimit: ``data`` is longer than ``max_bytes`` (limit ``document_file_bytes``).
        DocumentRefused: ``empty_document``, or ``unsupported_media_type`` with the reason.
    """
    if len(data) > max_bytes:
        raise DocumentOverLimit("document_file_bytes", allowed=max_bytes, actual=len(data))
    if not data:
        raise DocumentRefused("empty_document", "no bytes")
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if _PDF_HEADER.search(data, 0, _PDF_WINDOW + 8):
        return MediaType.PDF
    if _cut_short(data):
        raise DocumentRefused("unsupported_media_type", "a truncated or damaged header")
    if _is_xml(data):
        return MediaType.XML
    if _is_text(data):
        return MediaType.TEXT
    raise DocumentRefused("unsupported_media_type", "not PDF, PNG, JPEG, TIFF, XML or UTF-8 text")


def _cut_short(data: bytes) -> bool:
    """A binary file stopped inside its signature (three bytes or more of one), or a
    ``%PDF`` without a version: a broken file, whatever its remaining bytes decode to."""
    if data.startswith(b"%PDF"):
        return True
    return len(data) >= 3 and any(
        sig.startswith(data) and len(data) < len(sig) for sig, _ in _SIGNATURES
    )


def _is_xml(data: bytes) -> bool:
    encoding = "utf-8"
    for bom, named in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], named
            break
    head = data[:_XML_PEEK]
    if encoding.startswith("utf-16"):
        head = head[: len(head) // 2 * 2]
    text = head.decode(encoding, errors="ignore")
    return _XML_START.match(text) is not None


def _is_text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(text) is None
