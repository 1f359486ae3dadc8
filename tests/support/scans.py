"""Scans drawn for the OCR tests: text rendered with Pillow in a Debian TrueType font.

The font is DejaVu Sans Mono (Debian's ``fonts-dejavu-core``, installed by
``make ocr-tools``): monospaced, so an invoice's columns stay columns on the image as
in its text. A missing font is an error, never a skip.
"""

from __future__ import annotations

import difflib
import io

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"


def render_text(
    text: str, *, dpi: int = 300, points: float = 9.0, angle: float = 0.0
) -> Image.Image:
    """``text`` drawn black on white at ``points`` size as a page scanned at ``dpi``,
    rotated by ``angle`` degrees (counter-clockwise) as a skewed feed would."""
    size = round(points * dpi / 72)
    font = ImageFont.truetype(FONT, size)
    lines = text.splitlines() or [""]
    advance = font.getlength("M")
    pitch = round(size * 1.35)
    margin = dpi // 3
    width = round(advance * max(len(line) for line in lines)) + 2 * margin
    image = Image.new("L", (width, pitch * len(lines) + 2 * margin), 255)
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((margin, margin + index * pitch), line, font=font, fill=0)
    if angle:
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    return image


def encode(image: Image.Image, format: str = "PNG", *, dpi: int | None = 300) -> bytes:
    out = io.BytesIO()
    options = {"dpi": (dpi, dpi)} if dpi else {}
    image.save(out, format=format, **options)
    return out.getvalue()


def char_accuracy(expected: str, got: str) -> float:
    """1 minus the character error rate, over whitespace-normalised texts (0–1)."""
    a, b = " ".join(expected.split()), " ".join(got.split())
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    edits = sum(
        max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )
    return max(0.0, 1.0 - edits / max(len(a), 1))


def word_recall(expected: str, got: str) -> float:
    """The share of ``expected``'s words (with their multiplicity) found in ``got``."""
    found: dict[str, int] = {}
    for word in got.split():
        found[word] = found.get(word, 0) + 1
    words = expected.split()
    hits = 0
    for word in words:
        if found.get(word, 0) > 0:
            found[word] -= 1
            hits += 1
    return hits / max(len(words), 1)
