"""A page of a file as a PNG the review console shows beside the extracted values.

A PDF page is rendered by PDFium with its longer side :data:`MAX_SIDE` pixels; a
frame of a PNG, JPEG or TIFF is decoded within the same pixel and page limits as for
OCR, turned upright by its EXIF orientation and shrunk to fit :data:`MAX_SIDE`. The
image keeps the page's proportions, so evidence rectangles given as fractions of the
page (:mod:`pipeline.documents.evidence_boxes`) lie over it at any size.

A page that was OCR'd is shown as it was read: ``turn`` (the quarter turns and the
skew the OCR's normalisation gave it, kept beside its words:
:func:`pipeline.documents.kept_turns`) turns it upright and level the same way
(:func:`pipeline.documents.page_image.turn_as_read`), so its words' boxes, fractions
of the normalised image, lie over their ink.
"""

from __future__ import annotations

import io
import itertools
import warnings

from PIL import Image, ImageOps

from pipeline.documents.page_image import open_pages, turn_as_read
from pipeline.documents.pdf_render import render_pdf_page
from pipeline.documents.sniff import MediaType
from pipeline.errors import DocumentRefused, NotFound

#: The longer side of a page image, in pixels: A4 at about 190 dpi.
MAX_SIDE = 1600

_IMAGES = (MediaType.PNG, MediaType.JPEG, MediaType.TIFF)


def page_png(
    data: bytes,
    media_type: MediaType,
    number: int,
    *,
    max_pages: int,
    max_pixels: int,
    turn: tuple[int, float] | None = None,
) -> bytes:
    """Page ``number`` (1-based) of the file ``data`` as PNG bytes; ``turn`` (clockwise
    quarter turns, skew in degrees) for a page OCR read, None for one it did not.

    Raises:
        NotFound: the file has no page ``number``, or is no paged file (text, XML).
        DocumentRefused: ``unreadable_document``, ``image_too_large``.
        DocumentOverLimit: more pages than ``max_pages``.
    """
    if media_type is MediaType.PDF:
        image = render_pdf_page(data, number, max_side=MAX_SIDE, max_pages=max_pages)
    elif media_type in _IMAGES:
        image = _frame(data, number, max_pages=max_pages, max_pixels=max_pixels)
    else:
        raise NotFound(f"a {media_type.value} document has no page images")
    if turn is not None:
        image = turn_as_read(image, *turn)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _frame(data: bytes, number: int, *, max_pages: int, max_pixels: int) -> Image.Image:
    if number < 1:
        raise NotFound(f"page {number}")
    frames = open_pages(data, max_pages=max_pages, max_pixels=max_pixels)
    frame = next(itertools.islice(frames, number - 1, None), None)
    if frame is None:
        raise NotFound(f"page {number}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a damaged EXIF block: the frame stays as it is
            frame = ImageOps.exif_transpose(frame) or frame
        if frame.mode not in ("1", "L", "P", "RGB", "RGBA"):
            frame = frame.convert("RGB")
        frame.thumbnail((MAX_SIDE, MAX_SIDE))
    except (OSError, ValueError) as exc:  # a mode Pillow cannot convert, a broken frame
        raise DocumentRefused("unreadable_document", f"image: {exc}") from exc
    return frame
