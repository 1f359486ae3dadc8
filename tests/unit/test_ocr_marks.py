"""A bare reading of a word whose accented twin is listed is proven by the page image:
no ink above or below its letters where the twin carries marks.

Real tesseract (``make ocr-tools``) on lines drawn in DejaVu Sans Mono: the character
boxes come from its hOCR, the ink from the image. A reading that lost an accent is
made by reading the same line printed bare (a monospaced font: every letter keeps its
box) and looking at the line printed with the accent.
"""

from __future__ import annotations

from PIL import Image

from pipeline.documents import OcrLexicon, read_document, sniff_media_type
from pipeline.documents.ocr_lexicon import OTHER, mark_mask
from pipeline.documents.ocr_marks import CLEAR, INK, UNKNOWN, above, below, page_marks
from pipeline.documents.tesseract import read_page
from pipeline.settings import Settings
from pipeline.worker.ocr_proof import doubt
from tests.support.scans import encode, render_text

SETTINGS = Settings()
LEXICON = OcrLexicon(
    {
        "fra": ["prestation", "de", "dé", "conseil", "pour", "le", "façade", "facade", "été"],
        "ita": ["di", "dì", "servizio"],
    }
)


def _line(text: str) -> Image.Image:
    return render_text(f"Prestation {text} conseil pour le client")


def _read_as(printed: str, read: str) -> dict[str, str]:
    """Each word tesseract read on the line printing ``read``, with its marks looked up
    on the line printing ``printed`` (same font, same boxes): ``{word: marks}``."""
    tsv, hocr = read_page(
        encode(_line(read)),
        binary=SETTINGS.ocr_tesseract,
        languages="fra+ita",
        dpi=300,
        seconds=60,
        page=1,
    )
    assert read in tsv  # tesseract read what was printed
    marks = page_marks(_line(printed), hocr)
    return dict(marks.values())


def test_a_bare_de_is_proven_bare() -> None:
    marks = _read_as("de", "de")["de"]
    assert above(marks[1]) == CLEAR and below(marks[1]) == CLEAR
    assert above(marks[0]) == UNKNOWN  # the d's own ascender is there
    assert doubt("de", "de", marks, 0, LEXICON, "fra") is None
    assert doubt("de", "de", None, 0, LEXICON, "fra") is not None  # without the image


def test_a_de_printed_with_its_accent_but_read_bare_is_not_proven() -> None:
    marks = _read_as("dé", "de")["de"]
    assert above(marks[1]) == INK
    assert doubt("de", "de", marks, 0, LEXICON, "fra") == (
        "an accented twin is listed, and the page has ink where it is accented"
    )


def test_a_cedilla_read_as_a_bare_c_is_not_proven_and_a_bare_c_is() -> None:
    lost = _read_as("façade", "facade")["facade"]
    assert below(lost[2]) == INK and above(lost[2]) == CLEAR
    assert doubt("facade", "facade", lost, 0, LEXICON, "fra") is not None
    bare = _read_as("facade", "facade")["facade"]
    assert below(bare[2]) == CLEAR
    assert doubt("facade", "facade", bare, 0, LEXICON, "fra") is None


def test_an_accent_read_where_none_is_printed_is_not_accepted() -> None:
    phantom = _read_as("de", "dé")["dé"]
    assert above(phantom[1]) == CLEAR
    assert doubt("dé", "dé", phantom, 0, LEXICON, "fra") == "its accent not seen inked"
    inked = _read_as("dé", "dé")["dé"]
    assert above(inked[1]) == INK
    assert doubt("dé", "dé", inked, 0, LEXICON, "fra") is None


def test_an_i_is_never_proven_bare_its_dot_is_where_an_accent_would_be() -> None:
    marks = _read_as("di", "di")["di"]
    assert above(marks[1]) == UNKNOWN
    assert doubt("di", "di", marks, 0, LEXICON, "ita") == (
        "an accented twin is listed, where the page cannot show an accent (an i's dot)"
    )


def test_the_document_stage_keeps_the_marks_with_each_ocr_word() -> None:
    data = encode(_line("de"))
    document = read_document(data, sniff_media_type(data, max_bytes=1 << 30), SETTINGS)
    words = {w.text: w.marks for w in document.pages[0].ocr.words}  # type: ignore[union-attr]
    assert words["de"] is not None and above(words["de"][1]) == CLEAR
    assert all(m is None or len(m) == len(t) for t, m in words.items())


def test_twin_masks_say_where_a_twin_carries_its_marks() -> None:
    assert mark_mask("dé", "de") == 1 << 2  # above the second letter
    assert mark_mask("façade", "facade") == 1 << 5  # below the third
    assert mark_mask("łza", "lza") & OTHER  # a stroke: no band shows it
    assert mark_mask("straße", "strasse") & OTHER
    assert LEXICON.twin_mask("De", "fra") == 1 << 2
    assert LEXICON.twin_mask("conseil", "fra") is None
