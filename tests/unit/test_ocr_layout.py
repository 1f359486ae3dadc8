"""Tesseract's TSV into words and a page text that keeps columns, and the page
normalisation before it (orientation, resolution, skew): no tesseract needed here."""

from __future__ import annotations

import pytest
from PIL import Image

from pipeline.documents.ocr_layout import layout_text, parse_tsv, tesseract_lines
from pipeline.documents.page_image import estimate_skew, normalise
from tests.support.scans import render_text

HEADER = (
    "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
)


def _tsv(*words: tuple[int, int, int, int, str]) -> str:
    """Words as ``(block, line, left, top, text)``, 20 px per character, 30 px high."""
    rows = [
        HEADER,
        "1\t1\t0\t0\t0\t0\t0\t0\t2000\t1000\t-1\t",
        "2\t1\t1\t0\t0\t0\t0\t0\t10\t10\t-1\t",
    ]
    for number, (block, line, left, top, text) in enumerate(words, 1):
        width = 20 * len(text) - 4
        rows.append(f"5\t1\t{block}\t1\t{line}\t{number}\t{left}\t{top}\t{width}\t30\t91.5\t{text}")
    return "\n".join(rows) + "\n"


def test_words_keep_their_columns_and_offsets() -> None:
    # a table read by tesseract as two blocks: labels left, amounts right
    words = parse_tsv(
        _tsv(
            (1, 1, 100, 100, "Net"),
            (1, 2, 100, 150, "Total"),
            (1, 2, 220, 150, "due"),
            (2, 1, 700, 100, "100.00"),
            (2, 2, 700, 150, "119.00"),
        )
    )
    text, placed = layout_text(words)
    assert text == "Net                            100.00\nTotal due                      119.00\n"
    assert all(text[w.start : w.end] == w.text for w in placed)
    assert {w.confidence for w in placed} == {91.5}
    assert [line.text for line in tesseract_lines(words)] == [
        "Net",
        "Total due",
        "100.00",
        "119.00",
    ]


def test_a_word_cut_in_two_by_the_layout_analysis_is_joined() -> None:
    words = parse_tsv(_tsv((1, 1, 100, 100, "4'976."), (2, 1, 228, 100, "87")))
    text, placed = layout_text(words)
    assert text == "4'976.87\n"
    assert [(w.text, w.start, w.end) for w in placed] == [("4'976.87", 0, 8)]
    assert placed[0].box.right == 228 + 36


def test_a_wide_vertical_gap_is_one_blank_line() -> None:
    rows = [(1, n + 1, 100, 100 + 40 * n, text) for n, text in enumerate("abc")]
    words = parse_tsv(_tsv(*rows, (2, 1, 100, 400, "d")))
    assert layout_text(words)[0] == "a\nb\nc\n\nd\n"


def test_blank_and_non_word_rows_are_ignored() -> None:
    assert parse_tsv(HEADER + "\n5\t1\t1\t1\t1\t1\t0\t0\t10\t10\t95\t \n") == []
    assert layout_text([]) == ("", ())


@pytest.mark.parametrize("angle", [-4.0, -1.5, 0.0, 2.0, 3.0])
def test_skew_is_measured_within_a_quarter_degree(angle: float) -> None:
    lines = "\n".join(f"Line {n}: 1'049 Stk. Stahlwinkel 40 mm  3.33  3'493.17" for n in range(20))
    image = render_text(lines, dpi=150, angle=angle)
    assert estimate_skew(image) == pytest.approx(-angle, abs=0.3)


def test_a_blank_page_has_no_skew() -> None:
    assert estimate_skew(Image.new("L", (500, 700), 255)) == 0.0


def test_exif_orientation_is_applied_and_small_images_upscaled() -> None:
    image = Image.new("RGB", (400, 200), "white")
    exif = image.getexif()
    exif[0x0112] = 6  # "rotate 90 clockwise to display"
    image.info["exif"] = exif.tobytes()
    page = normalise(image, number=1, dpi=100.0, target_dpi=300, max_pixels=10_000_000)
    assert page.image.mode == "L"
    assert page.image.size == (600, 1200)  # upright, then 3x to 300 dpi
    assert page.dpi == pytest.approx(300)


def test_upscaling_stays_within_the_pixel_limit() -> None:
    image = Image.new("L", (1000, 1000), 255)
    page = normalise(image, number=1, dpi=75.0, target_dpi=300, max_pixels=4_000_000)
    assert page.image.width * page.image.height <= 4_000_000
    assert page.dpi == pytest.approx(150)


def test_the_orientation_callback_turns_the_page_clockwise() -> None:
    image = Image.new("L", (400, 300), 255)
    image.paste(0, (0, 0, 10, 10))  # top-left ink ends top-right after a clockwise quarter turn
    seen: list[tuple[int, int]] = []

    def orient(gray: Image.Image) -> int:
        seen.append(gray.size)
        return 90

    page = normalise(image, number=1, dpi=300.0, target_dpi=300, max_pixels=10**7, orient=orient)
    assert seen == [(400, 300)]
    assert page.rotation == 90 and page.image.size == (300, 400)
    assert page.image.getpixel((295, 4)) < 64  # ink still, through the denoising blur


def test_a_number_cut_at_its_decimal_comma_on_one_line_is_joined() -> None:
    # tesseract reads a monospaced comma's white as a word gap: "41396," | "42" (8 px
    # apart, under a character), "765" | "," | "06"; a real space after a comma ("A4,"
    # | "80", 24 px) and words that are no number stay apart
    words = parse_tsv(
        _tsv(
            (1, 1, 100, 100, "41396,"),
            (1, 1, 224, 100, "42"),
            (1, 2, 100, 150, "765"),
            (1, 2, 166, 150, ","),
            (1, 2, 190, 150, "06"),
            (1, 3, 100, 200, "A4,"),
            (1, 3, 180, 200, "80"),
            (1, 4, 100, 250, "pz."),
            (1, 4, 164, 250, "12"),
        )
    )
    text, placed = layout_text(words)
    assert text.splitlines() == ["41396,42", "765,06", "A4, 80", "pz. 12"]
    assert all(text[w.start : w.end] == w.text for w in placed)
    assert placed[0].box.right == 224 + 36
