"""Generated invoices as files: a PDF with a text layer, and a scan of it.

The generator writes an invoice as laid-out text (monospaced lines, columns made of
spaces, pages split by form feeds). Real invoices arrive as files, so this renders
that text as one:

* :func:`pdf_bytes` — a PDF printed from an ERP: A4, every line drawn in DejaVu Sans
  Mono (monospaced, so the columns stay columns, and covering every letter the
  generator's ten languages print), one PDF page per text page (a page with more
  lines than fit continues on the next). Its text layer reads back through the
  document stage's PDF reader as the same lines.
* :func:`scan_bytes` — the same PDF as a scanner would return it: each page
  rasterised by PDFium at ``dpi`` (150–300), turned by a small skew, blurred, given
  gaussian noise and JPEG artefacts, then saved as PNG, JPEG or TIFF (a multi-page
  document always as a multi-frame TIFF) with its resolution declared.

Everything is deterministic: the same text and seed give the same bytes
(reportlab's ``invariant`` mode, seeded ``random``/``numpy`` draws, no clock).

The font is Debian's ``fonts-dejavu-core`` (``make ocr-tools`` installs it); a missing
font is an error here, never a fallback to a font that cannot print "ł" or "ø".
"""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pypdfium2 as pdfium
from PIL import Image, ImageFilter
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas

FONT_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
FONT_NAME = "DejaVuSansMono"
#: The font's advance width as a share of its size (1233/2048 in DejaVu Sans Mono).
ADVANCE_EM = 1233 / 2048
#: Largest font size in points; a page with longer lines is set smaller to fit.
FONT_SIZE = 8.0
#: Line pitch as a multiple of the font size.
LEADING = 1.3
MARGIN = 30.0

SCAN_FORMATS = ("PNG", "JPEG", "TIFF")
SCAN_SUFFIX = {"PNG": "png", "JPEG": "jpg", "TIFF": "tif"}


@cache
def _font() -> str:
    try:
        pdfmetrics.registerFont(TTFont(FONT_NAME, FONT_PATH))
    except Exception as exc:  # reportlab raises its own TTFError or an OSError
        raise RuntimeError(
            f"cannot load the invoice font {FONT_PATH} ({exc}): install fonts-dejavu-core "
            "(make ocr-tools)"
        ) from exc
    return FONT_NAME


def _page_lines(text: str, rows: int) -> list[list[str]]:
    """The text's pages (form feeds), each cut into PDF pages of at most ``rows`` lines."""
    pages: list[list[str]] = []
    for page in text.split("\f"):
        lines = page.split("\n")
        pages.extend(lines[i : i + rows] for i in range(0, max(len(lines), 1), rows))
    return pages


def pdf_bytes(text: str, *, font_size: float = FONT_SIZE) -> bytes:
    """``text`` as an A4 PDF with a text layer: a line per line, a page per page.

    A page whose longest line would not fit the width is set in a smaller size (the
    generator's widest lines are about 110 characters).
    """
    font = _font()
    width, height = A4
    rows = int((height - 2 * MARGIN) // (font_size * LEADING))
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True, pageCompression=1)
    canvas.setTitle("Invoice")
    for lines in _page_lines(text, rows):
        longest = max((len(line) for line in lines), default=0)
        size = min(font_size, (width - 2 * MARGIN) / (ADVANCE_EM * max(longest, 1)))
        canvas.setFont(font, size)
        y = height - MARGIN - font_size
        for line in lines:
            if line.strip():
                canvas.drawString(MARGIN, y, line)
            y -= font_size * LEADING
        canvas.showPage()
    canvas.save()
    return out.getvalue()


def pdf_pages(data: bytes) -> int:
    """How many pages the PDF in ``data`` has."""
    pdf = pdfium.PdfDocument(data)
    try:
        return len(pdf)
    finally:
        pdf.close()


@dataclass(frozen=True)
class ScanSettings:
    """How one scan is degraded; drawn by :func:`draw_scan_settings`.

    ``skew`` in degrees (counter-clockwise), ``blur`` the gaussian radius in pixels,
    ``noise`` the gaussian sigma in gray levels (0–255), ``jpeg_quality`` the
    re-encode quality, ``format`` one of :data:`SCAN_FORMATS`.
    """

    dpi: int
    skew: float
    blur: float
    noise: float
    jpeg_quality: int
    format: str

    def __post_init__(self) -> None:
        if not 150 <= self.dpi <= 300:
            raise ValueError(f"dpi must be 150..300, got {self.dpi}")
        if self.format not in SCAN_FORMATS:
            raise ValueError(f"format must be one of {SCAN_FORMATS}, got {self.format!r}")
        if not 1 <= self.jpeg_quality <= 95:
            raise ValueError(f"jpeg_quality must be 1..95, got {self.jpeg_quality}")

    @property
    def suffix(self) -> str:
        return SCAN_SUFFIX[self.format]

    def page_size(self) -> tuple[int, int]:
        """An A4 page's size in pixels at :attr:`dpi` (what every frame measures: PDFium
        renders a part pixel as a whole one)."""
        width, height = A4
        return math.ceil(width * self.dpi / 72), math.ceil(height * self.dpi / 72)


def draw_scan_settings(seed: int, *, pages: int = 1, format: str | None = None) -> ScanSettings:
    """A scan's settings drawn from ``seed``: 150–300 dpi, skew within ±1.5°, a mild
    blur, noise and JPEG quality 60–85; the format drawn among PNG, JPEG and TIFF
    (``format`` fixes it), a multi-page document always TIFF (one frame a page)."""
    rng = random.Random(f"scan:{seed}")
    dpi = rng.choice((150, 200, 240, 300))
    settings = ScanSettings(
        dpi=dpi,
        skew=round(rng.uniform(-1.5, 1.5), 2),
        blur=round(rng.uniform(0.3, 0.8) * dpi / 300, 2),
        noise=round(rng.uniform(4.0, 12.0), 1),
        jpeg_quality=rng.randint(60, 85),
        format=rng.choice(SCAN_FORMATS),
    )
    chosen = format if format is not None else settings.format
    if pages > 1:
        chosen = "TIFF"
    return replace(settings, format=chosen)


def _jpeg_roundtrip(image: Image.Image, quality: int) -> Image.Image:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    out.seek(0)
    with Image.open(out) as decoded:
        return decoded.convert("L")


def degrade(page: Image.Image, settings: ScanSettings, seed: int) -> Image.Image:
    """One rendered page (mode ``L``) as the scanner returns it: turned, blurred, noisy,
    JPEG-compressed; the same size as ``page``."""
    image = page.rotate(
        settings.skew, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255
    )
    if settings.blur > 0:
        image = image.filter(ImageFilter.GaussianBlur(settings.blur))
    if settings.noise > 0:
        noise = np.random.default_rng(seed).normal(0.0, settings.noise, (image.height, image.width))
        pixels = np.asarray(image, dtype=np.float32) + noise
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    return _jpeg_roundtrip(image, settings.jpeg_quality)


def rasterise(pdf: bytes, dpi: int) -> list[Image.Image]:
    """Every page of ``pdf`` rendered by PDFium at ``dpi``, 8-bit gray."""
    document = pdfium.PdfDocument(pdf)
    try:
        images = []
        for index in range(len(document)):
            page = document[index]
            try:
                bitmap = page.render(scale=dpi / 72, grayscale=True)
                images.append(bitmap.to_pil().convert("L"))
            finally:
                page.close()
        return images
    finally:
        document.close()


def scan_bytes(pdf: bytes, settings: ScanSettings, seed: int) -> bytes:
    """``pdf``'s pages scanned with ``settings`` into one image file (its resolution
    declared). A multi-page PDF needs ``settings.format == "TIFF"``."""
    pages = [
        degrade(page, settings, seed * 1000 + number)
        for number, page in enumerate(rasterise(pdf, settings.dpi))
    ]
    if len(pages) > 1 and settings.format != "TIFF":
        raise ValueError(f"{len(pages)} pages need a multi-frame TIFF, not {settings.format}")
    out = io.BytesIO()
    options: dict[str, object] = {"dpi": (settings.dpi, settings.dpi)}
    if settings.format == "JPEG":
        options["quality"] = settings.jpeg_quality
    elif settings.format == "TIFF":
        # JPEG inside the TIFF, as scanners write it: deflate on a noisy page runs to
        # megabytes a frame, and a long invoice would pass the intake's file limit.
        options.update(
            compression="jpeg",
            quality=settings.jpeg_quality,
            save_all=True,
            append_images=pages[1:],
        )
    pages[0].save(out, format=settings.format, **options)
    return out.getvalue()


@dataclass(frozen=True)
class RenderedFile:
    """An invoice as a file: its bytes, the suffix to save it under, and how it was made."""

    data: bytes
    suffix: str
    kind: str
    pages: int
    scan: ScanSettings | None = None


def render_pdf(text: str) -> RenderedFile:
    data = pdf_bytes(text)
    return RenderedFile(data, "pdf", "pdf", pdf_pages(data))


def render_scan(text: str, seed: int, *, format: str | None = None) -> RenderedFile:
    """``text`` printed (:func:`pdf_bytes`) and scanned with settings drawn from ``seed``."""
    pdf = pdf_bytes(text)
    pages = pdf_pages(pdf)
    settings = draw_scan_settings(seed, pages=pages, format=format)
    return RenderedFile(scan_bytes(pdf, settings, seed), settings.suffix, "scan", pages, settings)
