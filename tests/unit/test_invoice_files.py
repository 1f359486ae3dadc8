"""Generated invoices as files (issue 43): the PDF's text layer reads back as the
invoice, the scan is the image it declares, both deterministic by seed, and
``fenceline generate`` writes a dataset ``fenceline eval --dataset`` loads.

The OCR test runs the real tesseract binary (``make ocr-tools``); it never skips.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmarks.eval.dataset import load_dataset
from benchmarks.invoices.files import (
    SCAN_FORMATS,
    ScanSettings,
    degrade,
    draw_scan_settings,
    pdf_bytes,
    pdf_pages,
    render_pdf,
    render_scan,
    scan_bytes,
)
from benchmarks.invoices.generator import generate_invoice
from cluster.cli import main as fenceline
from pipeline.documents import MediaType, read_document, sniff_media_type
from pipeline.settings import Settings
from tests.support.scans import char_accuracy

SETTINGS = Settings()


def _read(data: bytes):  # type: ignore[no-untyped-def]
    return read_document(data, sniff_media_type(data, max_bytes=1 << 30), SETTINGS)


def _flat(text: str) -> str:
    """Whitespace folded (the grid reads a no-break space as a space)."""
    return " ".join(text.replace("\u00a0", " ").replace("\u202f", " ").split())


@pytest.mark.parametrize(
    ("seed", "language"),
    [(3, "en"), (0, "da"), (7, "de"), (12, "fr"), (24, "pl")],
)
def test_the_pdf_text_layer_reads_back_as_the_invoice(seed: int, language: str) -> None:
    invoice = generate_invoice(seed, max_line_items=40, languages=(language,))
    truth = invoice.truth
    assert truth.invoice_number and truth.gross_total and truth.net_total
    file = render_pdf(invoice.ocr_text)
    document = _read(file.data)
    text_pages = invoice.ocr_text.count("\f") + 1
    assert file.pages == text_pages == len(document.pages)
    assert document.ocr_pages == ()  # a text layer, nothing OCR'd
    got = _flat(document.text)
    assert truth.invoice_number.value in got
    for field in (truth.gross_total, truth.net_total):
        assert _flat(field.evidence.quote) in got
    # Every letter survives, accents and all (a WinAnsi font would lose "ł", "ø").
    assert char_accuracy(_flat(invoice.ocr_text), got) >= 0.99
    assert {c for c in invoice.ocr_text if c.isalpha()} <= set(document.text)


def test_a_line_as_wide_as_the_widest_generated_fits_the_page() -> None:
    wide = "Total " + "x" * 100 + " 1,234.56 EUR"  # 119 characters
    document = _read(pdf_bytes(f"Invoice 7\n{wide}"))
    assert wide in document.text


def test_a_page_too_long_for_one_pdf_page_continues_on_the_next() -> None:
    text = "\n".join(f"line {i}" for i in range(200))
    data = pdf_bytes(text)
    pages = pdf_pages(data)
    assert pages == 3  # 200 lines at 10.4 pt on A4 less the margins: 75 a page
    document = _read(data)
    assert [line for line in document.text.replace("\f", "\n").split("\n") if line] == [
        f"line {i}" for i in range(200)
    ]


def test_the_pdf_is_the_same_bytes_every_time() -> None:
    text = generate_invoice(5, max_line_items=3).ocr_text
    assert pdf_bytes(text) == pdf_bytes(text)


def test_scan_settings_stay_in_their_ranges_and_cover_every_format() -> None:
    drawn = [draw_scan_settings(seed) for seed in range(200)]
    assert all(150 <= s.dpi <= 300 for s in drawn)
    assert all(abs(s.skew) <= 1.5 for s in drawn)
    assert all(60 <= s.jpeg_quality <= 85 for s in drawn)
    assert all(0 < s.blur <= 0.8 and 0 < s.noise <= 12 for s in drawn)
    assert {s.format for s in drawn} == set(SCAN_FORMATS)
    assert {s.dpi for s in drawn} >= {150, 300}
    assert draw_scan_settings(3, pages=2).format == "TIFF"
    assert draw_scan_settings(3, format="JPEG").format == "JPEG"
    with pytest.raises(ValueError, match="dpi"):
        ScanSettings(dpi=600, skew=0, blur=0, noise=0, jpeg_quality=70, format="PNG")


@pytest.mark.parametrize("fmt", SCAN_FORMATS)
def test_a_scan_is_an_a4_gray_image_at_its_declared_dpi(fmt: str) -> None:
    text = generate_invoice(8, max_line_items=3).ocr_text
    file = render_scan(text, 8, format=fmt)
    assert file.scan is not None and file.scan.format == fmt and file.pages == 1
    assert sniff_media_type(file.data, max_bytes=1 << 30) == MediaType(
        {"PNG": "image/png", "JPEG": "image/jpeg", "TIFF": "image/tiff"}[fmt]
    )
    with Image.open(io.BytesIO(file.data)) as image:
        assert image.format == fmt
        assert image.mode == "L"
        assert image.size == file.scan.page_size()
        width_in = image.size[0] / file.scan.dpi
        assert width_in == pytest.approx(8.27, abs=0.01)  # A4
        dpi = image.info["dpi"]
        assert (round(dpi[0]), round(dpi[1])) == (file.scan.dpi, file.scan.dpi)
        pixels = np.asarray(image)
    # Degraded: the paper is no longer one white (noise), yet mostly light.
    margin = pixels[:40, :]
    assert len(np.unique(margin)) > 10
    assert margin.mean() > 200


def test_a_scan_is_deterministic_by_seed() -> None:
    text = generate_invoice(8, max_line_items=3).ocr_text
    assert render_scan(text, 8).data == render_scan(text, 8).data
    assert render_scan(text, 8, format="PNG").data != render_scan(text, 9, format="PNG").data


def test_a_multi_page_scan_is_a_tiff_with_a_frame_a_page() -> None:
    text = "Invoice 1\nTotal 10.00\fPage two\nmore"
    file = render_scan(text, 4)
    assert file.pages == 2 and file.scan is not None and file.scan.format == "TIFF"
    with Image.open(io.BytesIO(file.data)) as image:
        assert getattr(image, "n_frames", 1) == 2
        for frame in range(2):
            image.seek(frame)
            assert image.size == file.scan.page_size() and image.mode == "L"
    with pytest.raises(ValueError, match="multi-frame TIFF"):
        scan_bytes(pdf_bytes(text), ScanSettings(200, 0.0, 0.0, 0.0, 80, "PNG"), 1)


def _bar_row(pixels: np.ndarray, column: int) -> float:
    """The mean row of the dark pixels in ``column``."""
    rows = np.nonzero(pixels[:, column] < 128)[0]
    return float(rows.mean())


def test_the_skew_turns_the_page_by_its_angle() -> None:
    page = Image.new("L", (1000, 400), 255)
    page.paste(0, (100, 195, 900, 205))  # a horizontal bar, 800 px long
    settings = ScanSettings(300, 1.5, 0.0, 0.0, 85, "PNG")
    pixels = np.asarray(degrade(page, settings, 1))
    rise = _bar_row(pixels, 150) - _bar_row(pixels, 850)  # counter-clockwise: right end up
    assert rise == pytest.approx(700 * math.tan(math.radians(1.5)), abs=2.0)
    level = np.asarray(degrade(page, ScanSettings(300, 0.0, 0.0, 0.0, 85, "PNG"), 1))
    assert abs(_bar_row(level, 150) - _bar_row(level, 850)) < 1.0


def test_fenceline_generate_writes_files_and_a_dataset_eval_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pdfs"
    argv = ["generate", "--count", "3", "--seed", "40", "--as", "pdf", "--out", str(out)]
    assert fenceline([*argv, "--max-line-items", "5"]) == 0
    assert "wrote 3 invoices as pdf" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "dataset.jsonl",
        "gen-40-clean.pdf",
        "gen-41-clean.pdf",
        "gen-42-clean.pdf",
    ]
    lines = [json.loads(line) for line in (out / "dataset.jsonl").read_text().splitlines()]
    assert [line["document"] for line in lines] == [f"gen-{s}-clean.pdf" for s in (40, 41, 42)]
    assert all("ocr_text" not in line for line in lines)
    dataset = load_dataset(out / "dataset.jsonl")
    assert dataset.skipped == [] and len(dataset.cases) == 3
    for seed, case in zip((40, 41, 42), dataset.cases, strict=True):
        invoice = generate_invoice(seed, max_line_items=5)
        assert case.tags == {"media_type": "application/pdf", "ocr_pages": 0}
        assert invoice.truth.invoice_number is not None
        assert case.record.truth.invoice_number == invoice.truth.invoice_number.value
        assert case.record.truth.invoice_number in case.record.text
        assert case.record.family == invoice.layout
        assert case.record.expected_decision == "SUCCEEDED"


def test_fenceline_generate_writes_scans_named_by_their_format(tmp_path: Path) -> None:
    out = tmp_path / "scans"
    argv = ["generate", "-n", "2", "--seed", "8", "--as", "scan", "--format", "jpeg"]
    assert fenceline([*argv, "--max-line-items", "3", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in (out / "dataset.jsonl").read_text().splitlines()]
    assert [line["document"] for line in lines] == ["gen-8-clean.jpg", "gen-9-clean.jpg"]
    assert all("JPEG quality" in line["notes"] for line in lines)
    for line in lines:
        with Image.open(out / line["document"]) as image:
            assert image.format == "JPEG" and image.mode == "L"


def test_fenceline_generate_refuses_an_unknown_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "-n", "1", "--variants", "nonsense", "--out", str(tmp_path / "x")]
    assert fenceline(argv) == 2
    assert "nonsense" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.ocr
def test_ocr_of_a_generated_scan_finds_the_invoice_number_and_total() -> None:
    invoice = generate_invoice(8, max_line_items=3, languages=("en",))
    assert invoice.truth.invoice_number and invoice.truth.gross_total
    file = render_scan(invoice.ocr_text, 8, format="JPEG")
    assert file.scan is not None
    document = _read(file.data)
    assert document.ocr_pages == (1,)
    assert invoice.truth.invoice_number.value in document.text
    assert _flat(invoice.truth.gross_total.evidence.quote) in _flat(document.text)


@pytest.mark.parametrize("fmt", SCAN_FORMATS)
def test_the_page_reader_takes_each_formats_declared_dpi(fmt: str) -> None:
    # a TIFF declares its resolution as an IFDRational, which the reader once refused
    from pipeline.documents.page_image import declared_dpi

    file = render_scan(generate_invoice(8, max_line_items=3).ocr_text, 8, format=fmt)
    assert file.scan is not None
    with Image.open(io.BytesIO(file.data)) as image:
        assert declared_dpi(image) == pytest.approx(file.scan.dpi, abs=0.1)
