"""An OCR replica's body without Ray: one page at a time, pages and seconds counted by
outcome; and a driver given the pool's config OCRs through it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import Any

import pytest
from PIL import Image

from cluster.drivers import EngineSpec, TaskDriver
from cluster.ocr_client import RayOcrPool
from deployments import ocr_pool
from deployments.ocr_pool import OcrPoolConfig, OcrReplica
from pipeline.documents import OcrPage
from pipeline.errors import OcrPageTimeout
from pipeline.settings import Settings
from pipeline.worker import WorkerConfig


async def test_a_replica_reads_one_page_at_a_time_and_counts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    active, most = 0, 0
    lock = threading.Lock()

    def slow(pages: Iterable[Any], settings: Settings) -> tuple[OcrPage, ...]:
        nonlocal active, most
        ((number, _image, _dpi),) = list(pages)
        with lock:
            active += 1
            most = max(most, active)
        time.sleep(0.1)
        with lock:
            active -= 1
        if number == 3:
            raise OcrPageTimeout(3, seconds=60)
        return (OcrPage(number, 10, 10, None, 0, 0.0, f"P{number}", (), ()),)

    monkeypatch.setattr(ocr_pool, "ocr_images", slow)
    replica = OcrReplica()
    image = Image.new("L", (10, 10), 255)
    got = await asyncio.gather(
        *(replica.ocr(n, image, None, Settings()) for n in (1, 2, 3)), return_exceptions=True
    )
    assert [p.text for p in got if isinstance(p, OcrPage)] == ["P1", "P2"]
    assert isinstance(got[2], OcrPageTimeout)
    assert most == 1  # never two pages at once on one replica
    sample = replica.metrics.registry.get_sample_value
    assert sample("fenceline_ocr_pages_total", {"outcome": "ok"}) == 2
    assert sample("fenceline_ocr_pages_total", {"outcome": "ocr_page_timeout"}) == 1
    assert sample("fenceline_ocr_page_seconds_count") == 3


def test_a_driver_ocrs_through_the_pool_only_when_the_runtime_runs_one() -> None:
    worker = WorkerConfig(worker_id="d")
    pooled = TaskDriver(Settings(), worker, EngineSpec(), ocr=OcrPoolConfig(), actor_prefix="x")
    assert isinstance(pooled.ocr, RayOcrPool) and pooled.ocr.prefix == "x"
    assert TaskDriver(Settings(), worker, EngineSpec()).ocr is None  # in process
