"""Media types from the bytes, never from the name: each type, lies and cut-off headers."""

from __future__ import annotations

import pytest

from pipeline.documents import MediaType, sniff_media_type
from pipeline.errors import DocumentOverLimit, DocumentRefused

LIMIT = 1 << 20

PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 13
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01" + b"\x00" * 16
TIFF_LE = b"II*\x00\x08\x00\x00\x00" + b"\x00" * 16
TIFF_BE = b"MM\x00*\x00\x00\x00\x08" + b"\x00" * 16
CII = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<rsm:CrossIndustryInvoice xmlns:rsm="urn:un:unece:uncefact:data:standard:'
    b'CrossIndustryInvoice:100"/>'
)
UBL = b'<Invoice xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2">\n</Invoice>'
TEXT = "Rechnung Nr. 2026-0042\nBetrag: 1.234,56 €\tfällig 31.12.2026\n".encode()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PDF, MediaType.PDF),
        (b"\r\n\x00junk from a mail gateway\n" + PDF, MediaType.PDF),  # header within 1024 bytes
        (PNG, MediaType.PNG),
        (JPEG, MediaType.JPEG),
        (TIFF_LE, MediaType.TIFF),
        (TIFF_BE, MediaType.TIFF),
        (CII, MediaType.XML),
        (b"\xef\xbb\xbf" + CII, MediaType.XML),  # UTF-8 byte-order mark
        (UBL, MediaType.XML),  # a root element, no declaration
        (b"\n  <!-- exported -->\n" + UBL, MediaType.XML),
        ("\ufeff".encode("utf-16-le") + CII.decode().encode("utf-16-le"), MediaType.XML),
        ("\ufeff".encode("utf-16-be") + UBL.decode().encode("utf-16-be"), MediaType.XML),
        (TEXT, MediaType.TEXT),
        (b"\xef\xbb\xbf" + TEXT, MediaType.TEXT),
        (b"Total: 3 < 4 items\n", MediaType.TEXT),  # a '<' later is not XML
        (b"x", MediaType.TEXT),
    ],
)
def test_each_type_is_known_by_its_bytes(data: bytes, expected: MediaType) -> None:
    assert sniff_media_type(data, max_bytes=LIMIT) is expected


@pytest.mark.parametrize(
    ("claimed_name", "data", "expected"),
    [
        ("invoice.pdf", PNG, MediaType.PNG),
        ("scan.png", PDF, MediaType.PDF),
        ("invoice.xml", TEXT, MediaType.TEXT),
        ("invoice.txt", CII, MediaType.XML),
        ("photo.jpg", TIFF_BE, MediaType.TIFF),
    ],
)
def test_a_lying_extension_changes_nothing(claimed_name: str, data: bytes, expected: str) -> None:
    # the function takes no name at all: what a sender calls the file cannot matter
    assert sniff_media_type(data, max_bytes=LIMIT) is expected


@pytest.mark.parametrize(
    "data",
    [
        PNG[:6],  # \x89PNG\r\n
        JPEG[:2],
        b"II*",
        b"MM\x00",
        b"%PDF",
        b"%PDF-",
        b"%PDF-1",  # the version cut off
        b"%PDF-x.y\nthe rest is text",
    ],
)
def test_a_truncated_header_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentRefused) as raised:
        sniff_media_type(data, max_bytes=LIMIT)
    assert raised.value.reason == "unsupported_media_type"
    assert raised.value.error_class == "unsupported_media_type"


@pytest.mark.parametrize(
    "data",
    [
        b"PK\x03\x04\x14\x00\x06\x00",  # a ZIP (docx, xlsx)
        b"GIF89a\x01\x00\x01\x00",
        b"\x00\x00\x00\x18ftypheic",  # HEIC
        b"MZ\x90\x00\x03\x00",  # an executable
        "ΑΒΓ".encode("iso-8859-7") + b" invoice",  # not UTF-8
        b"text with a NUL\x00 in it",
        b"\x1b[31mterminal escapes\x1b[0m",
        "\ufeffplain text".encode("utf-16-le"),  # UTF-16 text: only XML may be UTF-16
    ],
)
def test_anything_else_is_an_unsupported_media_type(data: bytes) -> None:
    with pytest.raises(DocumentRefused) as raised:
        sniff_media_type(data, max_bytes=LIMIT)
    assert raised.value.reason == "unsupported_media_type"


def test_empty_bytes_are_refused_by_name() -> None:
    with pytest.raises(DocumentRefused) as raised:
        sniff_media_type(b"", max_bytes=LIMIT)
    assert raised.value.reason == "empty_document"


def test_the_size_limit_comes_before_any_reading() -> None:
    assert sniff_media_type(PDF, max_bytes=len(PDF)) is MediaType.PDF
    with pytest.raises(DocumentOverLimit) as raised:
        sniff_media_type(PDF + b"\n", max_bytes=len(PDF))
    assert (raised.value.limit, raised.value.allowed, raised.value.actual) == (
        "document_file_bytes",
        len(PDF),
        len(PDF) + 1,
    )
    with pytest.raises(DocumentOverLimit):  # even bytes it could not have read anyway
        sniff_media_type(b"\x00" * 11, max_bytes=10)
