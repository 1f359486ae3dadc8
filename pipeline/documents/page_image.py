"""Page images for OCR: decoded within limits, upright, gray, at a readable resolution, level.

A scan or a photo arrives as PNG, JPEG or TIFF (a TIFF may hold many pages). Before a
pixel is decoded the header's size is checked against ``max_document_page_pixels`` and
the frame count against ``max_document_pages``: a small file can claim gigapixels (a
decompression bomb), and the check must come before the decoder allocates them.

Normalisation, in order: the EXIF orientation is applied (phones store photos sideways
with a tag), the page becomes 8-bit grayscale, a page below the target resolution is
upscaled (at most 4x; tesseract reads text of 20–30 px x-height best), a page scanned
sideways or upside down is turned by quarter turns (tesseract's orientation detection,
passed in), a skew within ±5° is measured by a projection profile (the angle whose
rows of ink are sharpest) and rotated away, and a light gaussian blur smooths a
scanner's noise and JPEG's artefacts.

Invariants: every page returned has at most ``max_pixels`` pixels, mode ``L``, and a
resolution (``dpi``) that is the declared one scaled, or ``None`` where the file
declared none (its boxes cannot be given in points then).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter, ImageOps, UnidentifiedImageError

from pipeline.errors import DocumentOverLimit, DocumentRefused

#: A4's width in inches: a page that declares no resolution is taken to be this wide.
_A4_INCHES = 8.27
_MAX_UPSCALE = 4.0
_SKEW_LIMIT = 5.0
_SKEW_STEP = 0.25
_PROFILE_WIDTH = 800
#: A light gaussian blur (pixels of the upscaled page) before recognition: a scanner's
#: noise and JPEG's ringing broke glyphs into specks that tesseract read at lower
#: confidence (on 150 dpi generated scans, words read right at >= 90 went up by 8 %).
DENOISE_RADIUS = 1.0


@dataclass(frozen=True, slots=True)
class PageImage:
    """One page ready for tesseract. ``dpi`` is None where the file declared none;
    ``rotation`` the clockwise quarter turns and ``skew`` the degrees (counter-clockwise)
    it was turned by."""

    number: int
    image: Image.Image
    dpi: float | None
    rotation: int
    skew: float

    def png(self) -> bytes:
        out = io.BytesIO()
        self.image.save(out, format="PNG")
        return out.getvalue()


@dataclass(frozen=True, slots=True)
class Frames:
    """An image file's frames, decoded one at a time as they are taken; ``count`` of them."""

    frames: Iterator[Image.Image]
    count: int

    def __iter__(self) -> Iterator[Image.Image]:
        return self.frames


def open_pages(data: bytes, *, max_pages: int, max_pixels: int) -> Frames:
    """The frames of the image file in ``data``: every frame's header is checked before
    the first is decoded; frames are then decoded one at a time, as they are taken.

    Raises:
        DocumentRefused: ``unreadable_document`` (no image, a broken one) or
            ``image_too_large`` (a frame over ``max_pixels``).
        DocumentOverLimit: more frames than ``max_pages`` (limit ``pages``).
    """
    with _decoding():
        image = Image.open(io.BytesIO(data))
        frames = getattr(image, "n_frames", 1)
        if frames > max_pages:
            raise DocumentOverLimit("pages", allowed=max_pages, actual=frames)
        for index in range(frames):
            image.seek(index)
            check_pixels(image.size, max_pixels)
    return Frames(_decode(image, frames), frames)


def _decode(image: Image.Image, frames: int) -> Iterator[Image.Image]:
    for index in range(frames):
        with _decoding():
            image.seek(index)
            image.load()
            frame = image.copy()
        yield frame


@contextlib.contextmanager
def _decoding() -> Iterator[None]:
    """Pillow's errors as refusals. Our own pixel limit decides: Pillow's global one (a
    warning, then an error at twice it) is not consulted before ours. Pillow also warns
    of damage it reads past (corrupt EXIF or TIFF tags): a frame decodes or raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except Image.DecompressionBombError as exc:
        raise DocumentRefused("image_too_large", str(exc)) from exc
    except (UnidentifiedImageError, OSError, ValueError, EOFError, SyntaxError) as exc:
        raise DocumentRefused("unreadable_document", f"image: {exc}") from exc


def check_pixels(size: tuple[int, int], max_pixels: int) -> None:
    """Refuse a page of more than ``max_pixels`` (``image_too_large``) or of none."""
    width, height = size
    if width <= 0 or height <= 0:
        raise DocumentRefused("unreadable_document", f"an image of {width}x{height} pixels")
    if width * height > max_pixels:
        raise DocumentRefused(
            "image_too_large", f"{width}x{height} pixels, at most {max_pixels} a page"
        )


def declared_dpi(image: Image.Image) -> float | None:
    """The horizontal resolution the file declares, if plausible (50–2400)."""
    dpi = image.info.get("dpi")
    if not isinstance(dpi, tuple) or not dpi:
        return None
    try:  # a TIFF declares an IFDRational, a PNG or JPEG a float or an int
        value = float(dpi[0])
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    if 50 <= value <= 2400:
        return round(value, 1)  # PNG stores pixels per metre: 299.9994 is 300
    return None


#: Given the gray, upscaled page: the degrees (0, 90, 180, 270) to turn it clockwise.
Orient = Callable[[Image.Image], int]


def normalise(
    image: Image.Image,
    *,
    number: int,
    dpi: float | None,
    target_dpi: int,
    max_pixels: int,
    orient: Orient | None = None,
) -> PageImage:
    """Upright, grayscale, upscaled to about ``target_dpi`` and deskewed.

    ``dpi`` is the page's known resolution (declared by the file, or the render's), or
    None: then the page is assumed to be A4 wide for the upscaling decision only.
    ``orient`` (tesseract's orientation detection) turns a page scanned sideways or
    upside down by quarter turns, after the EXIF orientation and before the deskew.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged EXIF block: the image stays as it is
        image = ImageOps.exif_transpose(image) or image
    gray = image.convert("L")
    assumed = dpi if dpi is not None else gray.width / _A4_INCHES
    scale = min(_MAX_UPSCALE, target_dpi / assumed) if assumed < target_dpi * 0.8 else 1.0
    if scale > 1.0:
        area = gray.width * gray.height
        scale = min(scale, (max_pixels / area) ** 0.5)
    if scale > 1.0:
        size = (round(gray.width * scale), round(gray.height * scale))
        gray = gray.resize(size, Image.Resampling.LANCZOS)
    else:
        scale = 1.0
    rotation = orient(gray) % 360 if orient is not None else 0
    if rotation:
        gray = gray.rotate(-rotation, expand=True)  # Image.rotate turns counter-clockwise
    skew = estimate_skew(gray)
    if skew:
        gray = gray.rotate(skew, resample=Image.Resampling.BICUBIC, fillcolor=255)
    gray = gray.filter(ImageFilter.GaussianBlur(DENOISE_RADIUS))
    return PageImage(number, gray, dpi * scale if dpi is not None else None, rotation, skew)


def turn_as_read(image: Image.Image, rotation: int, skew: float) -> Image.Image:
    """``image`` (a page upright by its EXIF orientation, at any scale) turned as
    :func:`normalise` turned it for OCR: ``rotation`` clockwise quarter turns (the
    canvas turned with it), then ``skew`` degrees counter-clockwise about its centre on
    the same canvas, filled white. Rotation about the centre commutes with scaling, so
    a box given as fractions of the normalised image lies on the result as on it: the
    review console shows an OCR'd page this way (:mod:`pipeline.documents.page_png`)."""
    if rotation % 360:
        image = image.rotate(-(rotation % 360), expand=True)
    if skew:
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB")
        white = 255 if image.mode == "L" else (255, 255, 255)
        image = image.rotate(skew, resample=Image.Resampling.BICUBIC, fillcolor=white)
    return image


def estimate_skew(gray: Image.Image) -> float:
    """The rotation (degrees, counter-clockwise as ``Image.rotate`` takes it) that makes
    the text's rows level: the angle within ±5° whose horizontal projection of ink has
    the largest variance of row-to-row differences, searched coarse then fine on a
    small copy. 0.0 for a page without ink."""
    small = gray
    if gray.width > _PROFILE_WIDTH:
        small = gray.resize(
            (_PROFILE_WIDTH, max(1, round(gray.height * _PROFILE_WIDTH / gray.width))),
            Image.Resampling.BOX,
        )
    ink = small.point(lambda v: 255 if v < 128 else 0)
    if ink.getbbox() is None:
        return 0.0

    def score(angle: float) -> float:
        rows = np.asarray(ink.rotate(angle, resample=Image.Resampling.NEAREST), dtype=np.float64)
        profile = rows.sum(axis=1)
        return float(np.square(np.diff(profile)).sum())

    coarse = [float(a) for a in np.arange(-_SKEW_LIMIT, _SKEW_LIMIT + 1e-9, 1.0)]
    best = max(coarse, key=score)
    fine = [float(a) for a in np.arange(best - 1.0, best + 1.0 + 1e-9, _SKEW_STEP)]
    angle = max(fine, key=score)
    return 0.0 if abs(angle) < _SKEW_STEP / 2 else round(angle, 2)
