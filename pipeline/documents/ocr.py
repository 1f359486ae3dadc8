"""OCR of page images with tesseract: words with boxes and confidence, lines, a layout text.

One page at a time: the image is normalised (:mod:`pipeline.documents.page_image`;
turned upright by tesseract's orientation detection where its ``osd`` data is
installed), sent to the tesseract binary (:mod:`pipeline.documents.tesseract`, a
subprocess with a time limit that orientation and recognition share) and its TSV read
back (:mod:`pipeline.documents.ocr_layout`) with, from the hOCR the same run writes,
the ink above and below each character (:mod:`pipeline.documents.ocr_marks`: where a
lost accent could be); the words it read under 90 are read
again alone, one more tesseract run for all of them, and keep the higher confidence
where both readings spell them alike (:mod:`pipeline.documents.ocr_reread`). The
result keeps pixels (the normalised image's: that is the image a page view shows)
and, where the resolution is known, converts to PDF points (72 per inch) like the
text layer.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from PIL import Image

from pipeline.documents.ocr_layout import (
    OcrLine,
    OcrWord,
    PixelBox,
    TsvWord,
    layout_text,
    parse_tsv,
    tesseract_lines,
)
from pipeline.documents.ocr_marks import page_marks
from pipeline.documents.ocr_reread import confirm, uncertain, word_strip
from pipeline.documents.page_image import PageImage, normalise
from pipeline.documents.tesseract import (
    choose_languages,
    detect_rotation,
    installed_languages,
    read_page,
    run_tesseract,
)
from pipeline.errors import OcrPageTimeout
from pipeline.settings import Settings

__all__ = ["OcrLine", "OcrPage", "OcrWord", "PixelBox", "ocr_images", "ocr_languages"]


@dataclass(frozen=True, slots=True)
class OcrPage:
    """One recognised page. ``width``/``height`` are the normalised image's pixels;
    ``dpi`` its resolution, None where the file declared none; ``rotation`` the
    clockwise quarter turns that made it upright and ``skew`` the degrees it was
    rotated by to level it."""

    number: int
    width: int
    height: int
    dpi: float | None
    rotation: int
    skew: float
    text: str
    words: tuple[OcrWord, ...]
    lines: tuple[OcrLine, ...]

    @property
    def confidence(self) -> float | None:
        """The mean word confidence (0–100), None for a page with no word."""
        return statistics.fmean(w.confidence for w in self.words) if self.words else None

    def points(self, box: PixelBox) -> tuple[float, float, float, float] | None:
        """``box`` in PDF points (left, top, right, bottom), None without a resolution."""
        if self.dpi is None:
            return None
        k = 72.0 / self.dpi
        return (box.left * k, box.top * k, box.right * k, box.bottom * k)


def ocr_languages(settings: Settings) -> str:
    """The configured languages that are installed, ``+``-joined.

    Raises:
        OcrUnavailable: no tesseract, or none of the languages installed.
    """
    installed = installed_languages(settings.ocr_tesseract)
    return choose_languages(settings.ocr_languages, installed)


def ocr_images(
    pages: Iterable[tuple[int, Image.Image, float | None]], settings: Settings
) -> tuple[OcrPage, ...]:
    """Recognise each ``(number, image, dpi)``; ``dpi`` None where unknown.

    Raises:
        OcrUnavailable: tesseract or its languages are missing (retryable).
        OcrPageTimeout: a page took longer than ``settings.ocr_page_seconds``.
        DocumentRefused: ``unreadable_document``, ``image_too_large``.
    """
    languages = ocr_languages(settings)
    detect = settings.ocr_detect_orientation and "osd" in installed_languages(
        settings.ocr_tesseract
    )
    out = []
    for number, image, dpi in pages:
        deadline = time.monotonic() + settings.ocr_page_seconds
        page = normalise(
            image,
            number=number,
            dpi=dpi,
            target_dpi=settings.ocr_dpi,
            max_pixels=settings.max_document_page_pixels,
            orient=functools.partial(_orient, number, deadline, settings) if detect else None,
        )
        out.append(_recognise(page, languages, deadline, settings))
    return tuple(out)


def _orient(number: int, deadline: float, settings: Settings, image: Image.Image) -> int:
    return detect_rotation(
        PageImage(number, image, None, 0, 0.0).png(),
        binary=settings.ocr_tesseract,
        dpi=settings.ocr_dpi,
        seconds=_left(deadline, number, settings),
        page=number,
    )


def _recognise(page: PageImage, languages: str, deadline: float, settings: Settings) -> OcrPage:
    tsv, hocr = read_page(
        page.png(),
        binary=settings.ocr_tesseract,
        languages=languages,
        dpi=round(page.dpi or settings.ocr_dpi),
        seconds=_left(deadline, page.number, settings),
        page=page.number,
    )
    words = _reread(page, _with_marks(page, parse_tsv(tsv), hocr), languages, deadline, settings)
    text, placed = layout_text(words)
    width, height = page.image.size
    return OcrPage(
        page.number,
        width,
        height,
        page.dpi,
        page.rotation,
        page.skew,
        text,
        placed,
        tesseract_lines(words),
    )


def _with_marks(page: PageImage, words: list[TsvWord], hocr: str) -> list[TsvWord]:
    """``words`` with the ink above and below each character
    (:mod:`pipeline.documents.ocr_marks`) where the hOCR has the same word."""
    marks = page_marks(page.image, hocr)
    out = []
    for word in words:
        box = word.box
        text, codes = marks.get((box.left, box.top, box.right, box.bottom), ("", ""))
        out.append(replace(word, marks=codes) if text == word.text else word)
    return out


def _reread(
    page: PageImage, words: list[TsvWord], languages: str, deadline: float, settings: Settings
) -> list[TsvWord]:
    """The page's words, those it read uncertainly read again alone
    (:mod:`pipeline.documents.ocr_reread`: only confidences move, only where both
    readings agree), within the page's time limit."""
    strip = word_strip(page.image, uncertain(words))
    if strip is None:
        return words
    tsv = run_tesseract(
        strip.png,
        binary=settings.ocr_tesseract,
        languages=languages,
        dpi=round(page.dpi or settings.ocr_dpi),
        seconds=_left(deadline, page.number, settings),
        page=page.number,
    )
    return confirm(words, strip, tsv)


def _left(deadline: float, number: int, settings: Settings) -> float:
    """Seconds left of the page's limit (orientation and recognition share it)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise OcrPageTimeout(number, seconds=settings.ocr_page_seconds)
    return left
