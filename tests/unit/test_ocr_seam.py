"""The OCR seam of the document stage, and its per-document time limit: pages are
recognised by the ``ocr`` the stage is given (the cluster's Ray pool), in this process
when it is given none, and a read that runs past ``document_read_seconds`` fails
terminally as ``document_read_timeout``."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from pipeline.documents import (
    FolderStore,
    MediaType,
    OcrPage,
    PageInput,
    ocr_images,
    pages_behind,
    read_document,
)
from pipeline.errors import DocumentReadTimeout, TerminalError
from pipeline.settings import Settings
from pipeline.worker import document_stage as document_stage_module
from pipeline.worker.document_stage import DocumentStage
from tests.support.pdfs import blank_pdf, text_pdf

TENANT = uuid.UUID(int=1)


def _tiff(pages: int) -> bytes:
    frames = [Image.new("L", (200, 100), 255) for _ in range(pages)]
    out = io.BytesIO()
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:], dpi=(300, 300))
    return out.getvalue()


def _page(number: int, text: str) -> OcrPage:
    return OcrPage(number, 200, 100, 300.0, 0, 0.0, text, (), ())


class FakeOcr:
    """An injected OCR: names every page it was given, sleeping ``seconds`` on each."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.seen: list[int] = []

    def __call__(self, pages: Iterable[PageInput], settings: Settings) -> tuple[OcrPage, ...]:
        out = []
        for number, _image, _dpi in pages:
            time.sleep(self.seconds)
            self.seen.append(number)
            out.append(_page(number, f"PAGE {number} BY POOL"))
        return tuple(out)


def _row(stored: Any, media: str) -> dict[str, Any]:
    return {
        "content": None,
        "content_type": media,
        "uri": stored.uri,
        "version": stored.version,
        "sha256": stored.sha256,
    }


async def test_the_stage_ocrs_with_the_ocr_it_is_given(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "documents")
    stored = await store.put(TENANT, _tiff(3), "image/tiff")
    fake = FakeOcr()
    read = await DocumentStage(store, max_pages=10, ocr=fake).read(_row(stored, "image/tiff"))
    assert fake.seen == [1, 2, 3]
    assert read.text == "PAGE 1 BY POOL\fPAGE 2 BY POOL\fPAGE 3 BY POOL"
    assert (read.ocr_pages, read.by_ocr) == ((1, 2, 3), True)


async def test_without_an_ocr_the_stage_ocrs_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default is :func:`ocr_images` in this process (the embedded run): the stage
    passes no ``ocr`` of its own, and ``read_document``'s default is ``ocr_images``."""
    assert (read_document.__kwdefaults__ or {})["ocr"] is ocr_images
    seen: list[dict[str, Any]] = []

    def recording(data: bytes, media: MediaType, settings: Settings, **kw: Any) -> Any:
        seen.append(kw)
        return read_document(data, media, settings, **kw)

    monkeypatch.setattr(document_stage_module, "read_document", recording)
    store = FolderStore(tmp_path / "documents")
    stored = await store.put(TENANT, text_pdf("Invoice 7"), "pdf")
    read = await DocumentStage(store, max_pages=10).read(_row(stored, "application/pdf"))
    assert read.text == "Invoice 7"
    assert [sorted(kw) for kw in seen] == [["deadline"]]  # no ocr: read_document's default


def test_read_document_stops_between_pages_once_its_time_is_up() -> None:
    fake = FakeOcr(seconds=0.3)
    settings = Settings(document_read_seconds=0.5)
    with pytest.raises(DocumentReadTimeout) as caught:
        read_document(_tiff(5), MediaType.TIFF, settings, ocr=fake)
    assert fake.seen == [1, 2]  # page 3 never started: 0.6 s had passed
    assert isinstance(caught.value, TerminalError)
    assert caught.value.error_class == "document_read_timeout"
    assert caught.value.pages_read == 2


class BacklogOcr(FakeOcr):
    """Records, as each page is taken, how many of its document's pages are behind it:
    what the Ray pool's ask tells the OCR fleet's scaling."""

    def __init__(self) -> None:
        super().__init__()
        self.behind: list[int] = []

    def __call__(self, pages: Iterable[PageInput], settings: Settings) -> tuple[OcrPage, ...]:
        out = []
        for asked, (number, _image, _dpi) in enumerate(pages, 1):
            self.behind.append(pages_behind(pages, asked))
            out.append(_page(number, f"PAGE {number}"))
        return tuple(out)


@pytest.mark.parametrize(
    ("data", "media"), [(_tiff(4), MediaType.TIFF), (blank_pdf(4), MediaType.PDF)]
)
def test_the_ocr_knows_how_many_pages_are_behind_each_page(data: bytes, media: MediaType) -> None:
    """Pages are made lazily, one at a time, yet the OCR is told the document's page
    count: a 4-page scan's pages have 3, 2, 1 and 0 pages behind them."""
    ocr = BacklogOcr()
    read_document(data, media, Settings(), ocr=ocr)
    assert ocr.behind == [3, 2, 1, 0]


def test_a_plain_iterable_of_pages_has_nothing_known_behind_it() -> None:
    assert pages_behind(iter([]), 1) == 0


def test_a_document_read_inside_its_time_is_read_whole() -> None:
    fake = FakeOcr(seconds=0.05)
    read = read_document(_tiff(3), MediaType.TIFF, Settings(document_read_seconds=5), ocr=fake)
    assert read.ocr_pages == (1, 2, 3)


async def test_the_stage_fails_a_slow_document_terminally(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "documents")
    stored = await store.put(TENANT, _tiff(4), "image/tiff")
    stage = DocumentStage(
        store, max_pages=10, settings=Settings(document_read_seconds=0.2), ocr=FakeOcr(0.15)
    )
    with pytest.raises(DocumentReadTimeout):
        await stage.read(_row(stored, "image/tiff"))


def test_the_default_limit_is_sane() -> None:
    settings = Settings()
    assert settings.document_read_seconds >= settings.ocr_page_seconds
