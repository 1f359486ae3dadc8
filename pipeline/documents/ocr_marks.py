"""Ink above and below each letter OCR read: whether the page could print a diacritic there.

Tesseract reads "de" for a printed "dé" sure of itself: the accent is a few pixels that
blur takes, and its confidence cannot show the loss. The page image can: an accent is
ink above the letter (between the line's x-height, or a capital's top, and the
ascenders), a cedilla or an ogonek ink below the baseline. Where that band holds no ink
at a letter OCR read bare, no mark was lost there; where it holds ink, one may have
been.

The letters' boxes are tesseract's character boxes (its hOCR with
``hocr_char_boxes=1``, written in the same run as the TSV); the bands are placed by the
line's geometry, not by the letter's own box (a letter whose accent tesseract dropped
may still have the accent's ink in its box): the x-height and baseline are the medians
of the nearest plain x-height letters of the same line (``a c e m n o r s u v w x z``),
a capital's top that of the nearest capitals and ascender letters.

Each word gets one code a character (:func:`mark_codes`): ``3 * above + below``, each
:data:`UNKNOWN` (the band cannot be checked: a letter with its own ink there, an ``i``'s
dot, a descender, too few neighbours to place the line, no character box),
:data:`CLEAR` (no ink) or :data:`INK`. ``ink`` is a pixel darker than a third of the way
from the word's paper to its ink; a band holds ink from :data:`MIN_INK_PIXELS` of them.
Every doubt is UNKNOWN or INK, never CLEAR: a CLEAR band is what proves a bare reading.
"""

from __future__ import annotations

import html
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

UNKNOWN, CLEAR, INK = 0, 1, 2
#: A band holds ink from this many dark pixels (noise the denoising blur leaves is
#: single pixels; an accent at 150 dpi, upscaled to 300, is dozens).
MIN_INK_PIXELS = 3
#: A pixel is dark below paper - this share of (paper - ink), the word's own levels.
_DARK_SHARE = 0.33
#: The bands, as shares of the x-height (H): above a lowercase letter from its line's
#: x-height up 0.7 H (accents sit 0.1-0.5 H above it), above a capital from the
#: capitals' top up 0.6 H, below the baseline 0.1-0.6 H; a gap of 0.12 H (at least
#: one pixel) keeps the letter's own blurred edge out.
_ABOVE_LOWER = 0.7
_ABOVE_UPPER = 0.6
_BELOW = 0.6
_GAP = 0.12
#: A line's metrics come from at most this many nearest reference letters (at least 2).
_NEAREST = 9
_MIN_REFERENCES = 2
_MIN_XHEIGHT = 6
#: Lowercase letters whose top is the x-height and whose bottom the baseline, and those
#: (with a top at the x-height) that descend; capitals and ascender letters for a
#: capital's top.
_XHEIGHT = frozenset("acemnorsuvwxz")
_DESCENDING = frozenset("gpqy")
_TALL = frozenset("ABCDEFGHIJKLMNOPRSTUVWXYZbdfhkl")


@dataclass(frozen=True, slots=True)
class CharBox:
    """One character tesseract read, its box in the page image's pixels."""

    text: str
    left: int
    top: int
    right: int
    bottom: int


@dataclass(frozen=True, slots=True)
class HocrWord:
    """A word of tesseract's hOCR: its box, its characters and its line's number."""

    box: tuple[int, int, int, int]
    chars: tuple[CharBox, ...]
    line: int


_SPAN = re.compile(
    r"<span class='(ocr_line|ocr_textfloat|ocr_header|ocr_caption|ocrx_word|ocrx_cinfo)'"
    r"[^>]*?title=[\"']([^\"']*)[\"'][^>]*>([^<]*)"
)
_BBOX = re.compile(r"(?:x_bboxes|bbox)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)")


def parse_hocr(hocr: str) -> list[HocrWord]:
    """The words of tesseract's hOCR with their character boxes, in reading order."""
    words: list[HocrWord] = []
    line = 0
    box: tuple[int, int, int, int] | None = None
    chars: list[CharBox] = []

    def close() -> None:
        if box is not None:
            words.append(HocrWord(box, tuple(chars), line))

    for kind, title, text in _SPAN.findall(hocr):
        found = _BBOX.search(title)
        if found is None:
            continue
        edges = (int(found[1]), int(found[2]), int(found[3]), int(found[4]))
        if kind == "ocrx_cinfo":
            if box is not None:
                chars.append(CharBox(html.unescape(text), *edges))
            continue
        close()
        box, chars = None, []
        if kind == "ocrx_word":
            box = edges
        else:
            line += 1
    close()
    return words


def _nearest(values: Sequence[tuple[float, int]], x: float) -> int | None:
    """The median of the values of the :data:`_NEAREST` references nearest ``x``."""
    if len(values) < _MIN_REFERENCES:
        return None
    near = sorted(values, key=lambda v: abs(v[0] - x))[:_NEAREST]
    return round(statistics.median(v[1] for v in near))


def _base(char: str) -> str:
    """The letter under ``char``'s marks (``é`` -> ``e``); ``char`` itself otherwise."""
    decomposed = unicodedata.normalize("NFD", char)
    return decomposed[0] if decomposed else char


def _ink(pixels: np.ndarray, dark: float) -> int:
    return int((pixels < dark).sum()) if pixels.size else 0


def mark_codes(
    gray: np.ndarray, words: Sequence[HocrWord]
) -> dict[tuple[int, int, int, int], tuple[str, str]]:
    """For each word whose characters are one character each, by its box: its text and
    its code per character (``str(3 * above + below)``); ``gray`` is the page image
    tesseract read (``uint8``, rows by columns)."""
    lines: dict[int, list[CharBox]] = {}
    for word in words:
        lines.setdefault(word.line, []).extend(word.chars)
    tops: dict[int, list[tuple[float, int]]] = {}
    bottoms: dict[int, list[tuple[float, int]]] = {}
    caps: dict[int, list[tuple[float, int]]] = {}
    for number, chars in lines.items():
        for c in chars:
            middle = (c.left + c.right) / 2
            if c.text in _XHEIGHT:
                tops.setdefault(number, []).append((middle, c.top))
                bottoms.setdefault(number, []).append((middle, c.bottom))
            elif c.text in _TALL:
                caps.setdefault(number, []).append((middle, c.top))
    height, width = gray.shape
    out: dict[tuple[int, int, int, int], tuple[str, str]] = {}
    for word in words:
        if not word.chars or any(len(c.text) != 1 for c in word.chars):
            continue
        text = "".join(c.text for c in word.chars)
        left, top, right, bottom = word.box
        region = gray[max(0, top) : max(0, bottom), max(0, left) : max(0, right)]
        if region.size == 0:
            continue
        paper = float(np.percentile(region, 95))
        ink = float(np.percentile(region, 5))
        if paper - ink < 40:  # no contrast to tell ink by
            out[word.box] = (text, "0" * len(word.chars))
            continue
        dark = paper - _DARK_SHARE * (paper - ink)
        codes = []
        for c in word.chars:
            middle = (c.left + c.right) / 2
            xtop = _nearest(tops.get(word.line, ()), middle)
            base = _nearest(bottoms.get(word.line, ()), middle)
            if xtop is None or base is None or base - xtop < _MIN_XHEIGHT:
                codes.append("0")
                continue
            xh = base - xtop
            gap = max(1, round(_GAP * xh))
            lo, hi = max(0, c.left), min(width, c.right)
            letter = _base(c.text)
            above = UNKNOWN
            if letter.isalpha() and hi > lo:
                if letter.islower() and (letter in _XHEIGHT or letter in _DESCENDING):
                    start, end = xtop - round(_ABOVE_LOWER * xh), xtop - gap
                    above = _band(gray, dark, start, end, lo, hi, height)
                elif letter.isupper() and letter != "Q":
                    cap = _nearest(caps.get(word.line, ()), middle)
                    if cap is not None and cap < xtop - gap:
                        start, end = cap - round(_ABOVE_UPPER * xh), cap - gap
                        above = _band(gray, dark, start, end, lo, hi, height)
            below = UNKNOWN
            if letter.isalpha() and hi > lo and letter not in _DESCENDING and letter not in "jQ":
                start, end = base + gap, base + round(_BELOW * xh)
                below = _band(gray, dark, start, end, lo, hi, height)
            codes.append(str(3 * above + below))
        out[word.box] = (text, "".join(codes))
    return out


def _band(
    gray: np.ndarray, dark: float, start: int, end: int, lo: int, hi: int, height: int
) -> int:
    if start < 0 or end > height or end <= start:
        return UNKNOWN
    return INK if _ink(gray[start:end, lo:hi], dark) >= MIN_INK_PIXELS else CLEAR


def page_marks(image: Image.Image, hocr: str) -> dict[tuple[int, int, int, int], tuple[str, str]]:
    """:func:`mark_codes` of tesseract's ``hocr`` for the page ``image`` it read."""
    return mark_codes(np.asarray(image.convert("L")), parse_hocr(hocr))


def above(code: str) -> int:
    """The above band's state (:data:`UNKNOWN`, :data:`CLEAR`, :data:`INK`) of one code."""
    return int(code) // 3 if code.isdigit() else UNKNOWN


def below(code: str) -> int:
    """The below band's state of one code."""
    return int(code) % 3 if code.isdigit() else UNKNOWN


__all__ = [
    "CLEAR",
    "INK",
    "UNKNOWN",
    "CharBox",
    "HocrWord",
    "above",
    "below",
    "mark_codes",
    "page_marks",
    "parse_hocr",
]
