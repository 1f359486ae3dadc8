"""A second reading of the words tesseract read uncertainly, each on its own.

On a page read as one block of rows (``--psm 6``) tesseract's confidence in a word
depends on its neighbours: a row's ``%`` column, a right-aligned amount or a code next
to a long description come out at 80–90 although read right. Read again alone, cut
out of the same normalised image with a margin and set on a white strip one under
another (one tesseract run for all of a page's uncertain words), most of them come
back the same and sure.

Invariants:

* A word's text never changes here: where the second reading spells it differently
  (or finds nothing, or splits it) the page's reading and confidence stay.
* Where both readings spell it alike, the word takes the higher of the two
  confidences: tesseract read the same characters twice, once in the row's context
  and once alone, and was sure of them at least once. On the generated scans of
  seeds 5000-5009 (2,670 words, compared with the printed text as in
  docs/documents.md "Values OCR read") the words read right at 90 or more went from
  92.5 % to 95.8 % of all words, while the share misread among those at 90 or more
  stayed at 1.5 % (36 words before, 38 after) and among those at 80 or more at 2.1 %.
* Boxes, lines and blocks are the page's; only confidences move.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

from PIL import Image

from pipeline.documents.ocr_layout import TsvWord, parse_tsv

#: Words the page read below this confidence are read again (the floor of
#: ``pipeline.worker.ocr_proof``'s unchecked values: above it a second reading changes
#: no decision).
REREAD_BELOW = 90.0
#: At most this many words of a page are read again (a page of noise stays bounded).
MAX_REREAD_WORDS = 400
#: The margin around a word's box, as a share of its height (at least 4 px): enough
#: for accents and descenders, less than a monospaced character's advance, so a
#: neighbouring word's ink stays out.
_MARGIN = 0.35
#: White between two words on the strip, as a share of the tallest cut: tesseract must
#: see each as a row of its own.
_GAP = 1.0
_INDENT = 20


@dataclass(frozen=True, slots=True)
class WordStrip:
    """The uncertain words cut out and stacked: ``rows[i]`` is the vertical pixel span
    of ``words[i]`` on ``png``."""

    png: bytes
    words: tuple[TsvWord, ...]
    rows: tuple[tuple[int, int], ...]


def uncertain(words: list[TsvWord], below: float = REREAD_BELOW) -> list[TsvWord]:
    """The words read below ``below`` (at most :data:`MAX_REREAD_WORDS`, the least
    certain first kept), in page order."""
    low = [w for w in words if w.confidence < below]
    if len(low) > MAX_REREAD_WORDS:
        keep = set(map(id, sorted(low, key=lambda w: w.confidence)[:MAX_REREAD_WORDS]))
        low = [w for w in low if id(w) in keep]
    return low


def word_strip(image: Image.Image, words: list[TsvWord]) -> WordStrip | None:
    """``words`` cut out of ``image`` (the page as tesseract read it) and stacked on a
    white strip, one a row; None for no word."""
    if not words:
        return None
    cuts = []
    for word in words:
        box = word.box
        margin = max(4, round((box.bottom - box.top) * _MARGIN))
        # within the page: Pillow fills a crop past the image's edge with black
        cuts.append(
            image.crop(
                (
                    max(0, box.left - margin),
                    max(0, box.top - margin),
                    min(image.width, box.right + margin),
                    min(image.height, box.bottom + margin),
                )
            )
        )
    gap = round(max(cut.height for cut in cuts) * _GAP)
    width = max(cut.width for cut in cuts) + 2 * _INDENT
    height = sum(cut.height for cut in cuts) + gap * (len(cuts) + 1)
    strip = Image.new("L", (width, height), 255)
    rows = []
    y = gap
    for cut in cuts:
        strip.paste(cut.convert("L"), (_INDENT, y))
        rows.append((y, y + cut.height))
        y += cut.height + gap
    out = io.BytesIO()
    strip.save(out, format="PNG")
    return WordStrip(out.getvalue(), tuple(words), tuple(rows))


def confirm(words: list[TsvWord], strip: WordStrip, tsv: str) -> list[TsvWord]:
    """``words`` with the confidence of each one the strip's reading (``tsv``) spells
    alike raised to that reading's, where higher; every other word as it was."""
    found: list[list[TsvWord]] = [[] for _ in strip.rows]
    for read in parse_tsv(tsv):
        middle = (read.box.top + read.box.bottom) / 2
        for index, (top, bottom) in enumerate(strip.rows):
            if top <= middle <= bottom:
                found[index].append(read)
                break
    raised: dict[int, float] = {}
    for word, reads in zip(strip.words, found, strict=True):
        if len(reads) == 1 and reads[0].text == word.text:
            raised[id(word)] = reads[0].confidence
    return [
        replace(w, confidence=max(w.confidence, raised[id(w)])) if id(w) in raised else w
        for w in words
    ]


__all__ = ["MAX_REREAD_WORDS", "REREAD_BELOW", "WordStrip", "confirm", "uncertain", "word_strip"]
