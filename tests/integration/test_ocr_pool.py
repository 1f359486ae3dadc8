"""The OCR pool on a local Ray: two replicas placed by the ``fenceline-ocr`` resource
(the OCR worker group's label), admitted by their own scope, reading a small
two-page scan into exactly the text in-process OCR reads, with the pages counted in
the replicas' metrics."""

from __future__ import annotations

import io
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cluster.admission import actor_name, admission_actor
from cluster.ocr_client import RayOcrPool
from deployments.ocr_pool import (
    OCR_RESOURCE,
    OcrPoolConfig,
    build_ocr_replica,
    replica_name,
)
from pipeline.documents import MediaType, read_document
from pipeline.errors import DocumentReadTimeout, OcrUnavailable
from pipeline.settings import Settings
from tests.support.scans import render_text

pytestmark = [pytest.mark.integration, pytest.mark.ocr, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
PREFIX = "ocrtest"
CONFIG = OcrPoolConfig(replicas=2, num_cpus=1, max_pages_in_flight=2)
PAGES = (
    "RECHNUNG Nr. RE-2024-0815\n\nNettobetrag       100,00 EUR",
    "Seite 2\n\nGesamtbetrag      119,00 EUR\nZahlbar bis 30.06.2024",
)


def _scan() -> bytes:
    """Two scanned pages in one TIFF, as a scanner saves a short invoice."""
    frames = [render_text(text) for text in PAGES]
    out = io.BytesIO()
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:], dpi=(300, 300))
    return out.getvalue()


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[RayOcrPool, list[Any]]]:
    import ray

    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    ray.init(
        address="local",  # a cluster of our own, never another engineer's
        num_cpus=2,
        resources={OCR_RESOURCE: CONFIG.replicas},
        include_dashboard=False,
        object_store_memory=100_000_000,
        namespace=f"ocr-{uuid.uuid4().hex[:8]}",
        runtime_env={"env_vars": {**RAY_ENV, "PYTHONPATH": str(ROOT)}},
        log_to_driver=False,
    )
    try:
        scope = admission_actor(  # held: a non-detached actor lives while its handle does
            actor_name(CONFIG.scope), {"scope": CONFIG.scope, **CONFIG.admission()}, detached=False
        )
        replicas = [
            build_ocr_replica(CONFIG, replica_name(PREFIX, i), detached=False)
            for i in range(CONFIG.replicas)
        ]
        ray.get([r.start.remote() for r in replicas], timeout=120)
        ray.get(scope.start.remote(), timeout=60)
        yield RayOcrPool(CONFIG, prefix=PREFIX), replicas
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_the_pool_reads_what_in_process_ocr_reads(pool: tuple[RayOcrPool, list[Any]]) -> None:
    import ray

    ocr, replicas = pool
    settings = Settings(ocr_detect_orientation=False)
    data = _scan()
    local = read_document(data, MediaType.TIFF, settings)
    pooled = read_document(data, MediaType.TIFF, settings, ocr=ocr)
    assert "RE-2024-0815" in local.text and "119,00" in local.text
    assert pooled.text == local.text
    assert pooled.ocr_pages == local.ocr_pages == (1, 2)
    assert [w.box for p in pooled.pages for w in p.words] == [
        w.box for p in local.pages for w in p.words
    ]
    # Both replicas worked (one page each: round robin), and counted their page.
    counts = [_pages_ok(ray.get(r.metrics_text.remote())) for r in replicas]
    assert counts == [1.0, 1.0]
    assert ocr.metrics.registry.get_sample_value("fenceline_ocr_pages_waiting") == 0
    assert _in_flight() == 0  # every page's grant came back


def test_a_pool_that_is_not_running_is_retryable(pool: tuple[RayOcrPool, list[Any]]) -> None:

    missing = RayOcrPool(CONFIG, prefix="nobody")
    image = Image.new("L", (100, 100), 255)
    with pytest.raises(OcrUnavailable):
        missing([(1, image, 300.0)], Settings())
    assert _in_flight() == 0  # the page's grant came back: it was never sent


def test_a_document_past_its_time_ends_and_gives_its_pages_back(
    pool: tuple[RayOcrPool, list[Any]],
) -> None:
    """Last in this module: its pages are cancelled on the replicas."""

    ocr, _replicas = pool
    settings = Settings(ocr_detect_orientation=False, document_read_seconds=0.3)
    with pytest.raises(DocumentReadTimeout):
        read_document(_scan(), MediaType.TIFF, settings, ocr=ocr)
    assert _in_flight() == 0  # the grants of the pages still out came back


def _in_flight(settle_s: float = 5.0) -> int:
    """The OCR scope's open grants once releases sent without waiting have landed
    (calls through another handle are not ordered after them)."""
    import ray

    until = time.monotonic() + settle_s
    while True:
        ref: Any = ray.get_actor(actor_name(CONFIG.scope)).snapshot.remote()
        open_grants = int(ray.get(ref)["in_flight"])
        if open_grants == 0 or time.monotonic() > until:
            return open_grants
        time.sleep(0.1)


def _pages_ok(text: str) -> float:
    for line in text.splitlines():
        if line.startswith('fenceline_ocr_pages_total{outcome="ok"}'):
            return float(line.split()[-1])
    return 0.0
