"""The OCR pool on a local Ray: two replicas placed by the ``fenceline-ocr`` resource
(the OCR worker group's label), admitted by their own scope, reading a small
two-page scan into exactly the text in-process OCR reads, with the pages counted in
the replicas' metrics."""

from __future__ import annotations

import asyncio
import io
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cluster.admission import actor_name, admission_actor
from cluster.ocr_client import RayOcrPool
from cluster.ocr_fleet import OcrFleet
from deployments.ocr_autoscaling import OcrAutoscaling
from deployments.ocr_pool import (
    OCR_RESOURCE,
    OcrPoolConfig,
    build_ocr_replica,
    replica_name,
)
from pipeline.documents import MediaType, PageStream, read_document
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


def test_one_tenants_long_upload_holds_another_tenants_page_back_one_page_at_most(
    pool: tuple[RayOcrPool, list[Any]],
) -> None:
    """Tenant a's upload (ten documents of three pages, on ten drivers' threads) queues
    first; tenant b's one page, asked from another driver, is read after at most the
    pages already on the replicas and one of a's, not after a's queue: the scope
    serves tenants in turn, a page each."""
    import ray

    _ocr, replicas = pool
    settings = Settings(ocr_detect_orientation=False)
    image = render_text("RECHNUNG Nr. RE-2024-0815")
    driver_a, driver_b = RayOcrPool(CONFIG, prefix=PREFIX), RayOcrPool(CONFIG, prefix=PREFIX)
    read_a: list[int] = []

    def document_a() -> None:
        pages = [(n, image, 300.0) for n in range(1, 4)]
        read_a.append(len(driver_a.for_tenant("a")(pages, settings)))

    def pages_read() -> float:
        return sum(_pages_ok(ray.get(r.metrics_text.remote())) for r in replicas)

    threads = [threading.Thread(target=document_a) for _ in range(10)]
    for thread in threads:
        thread.start()
    _until_queued(6)  # a's pages are waiting for grants before b asks
    read_before = pages_read()
    asked = time.monotonic()
    read_b = driver_b.for_tenant("b")([(1, image, 300.0)], settings)
    b_seconds = time.monotonic() - asked
    read_while_b = pages_read() - read_before
    for thread in threads:
        thread.join(timeout=240)
    assert read_a == [3] * 10 and len(read_b) == 1 and "RE-2024-0815" in read_b[0].text
    wait_b = driver_b.metrics.registry.get_sample_value("fenceline_ocr_page_wait_seconds_sum")
    print(
        f"b's page: {read_while_b:.0f} pages read from its ask to its return (its own "
        f"included), granted after {wait_b:.2f}s, back after {b_seconds:.2f}s"
    )
    # The two pages on the replicas when b asked, at most one of a's granted before
    # b's, b's own, and one of a's that may finish beside it: 5. In a's queue b would
    # come after 6 and more.
    assert read_while_b <= 5
    assert _in_flight() == 0


@dataclass
class _Replica:
    """A supervised member as the fleet sees it (the supervisor's own is the same shape)."""

    name: str
    create: Callable[[], Any]
    handle: Any = None


async def test_the_fleet_scales_replicas_and_the_page_budget_on_the_queue(
    pool: tuple[RayOcrPool, list[Any]],
) -> None:
    """Idle, the pool shrinks to its min and the scope's budget with it; with one long
    document's pages waiting — it asks for them one at a time, so one queued ask
    carries the pages behind it — a replica comes back and the budget grows; the
    pages are all read."""
    import ray

    scaling = OcrAutoscaling(min_replicas=1, max_replicas=2, downscale_delay_s=0)
    # The budget follows the running replicas (none fixed in the file).
    config = CONFIG.model_copy(update={"autoscaling": scaling, "max_pages_in_flight": None})
    scope = _Replica(
        "admission-fenceline-ocr", lambda: None, ray.get_actor(actor_name(config.scope))
    )

    def new_replica(i: int) -> _Replica:
        name = replica_name(PREFIX, i)
        return _Replica(name, lambda: build_ocr_replica(config, name, detached=False))

    async def ensure(member: _Replica) -> None:
        if member.handle is None:
            member.handle = member.create()
        await asyncio.wrap_future(member.handle.start.remote().future())

    members = [scope, *(new_replica(i) for i in range(2))]
    for member in members[1:]:
        await ensure(member)  # the two replicas the fixture runs, by name
    fleet = OcrFleet(
        config, members, asyncio.Lock(), scope_member=scope.name,
        new_replica=new_replica, ensure=ensure,
    )  # fmt: skip
    assert await fleet.run_once() == 1  # idle: down to the min
    assert _limits()["max_in_flight"] == 1
    with pytest.raises(ValueError):
        ray.get_actor(replica_name(PREFIX, 1))  # the highest-numbered one went

    image = render_text("RECHNUNG Nr. RE-2024-0815")
    settings = Settings(ocr_detect_orientation=False)
    driver = RayOcrPool(config, prefix=PREFIX)
    read: list[int] = []

    def document() -> None:
        pages = PageStream(((n, image, 300.0) for n in range(1, 7)), 6)
        read.append(len(driver.for_tenant("a")(pages, settings)))

    thread = threading.Thread(target=document)
    thread.start()
    # 1 page out and 1 ask queued with the pages behind it: over 1 a replica (one
    # queued page alone, 1 + 1 pages for 1 replica, would hold).
    await asyncio.to_thread(_until_queued, 1)
    assert await fleet.run_once() == 2
    assert fleet.last["waiting"] >= 2 and _limits()["max_in_flight"] == 2
    await asyncio.to_thread(thread.join, 240)
    assert read == [6]
    assert _in_flight() == 0


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


def _limits() -> dict[str, Any]:
    import ray

    ref: Any = ray.get_actor(actor_name(CONFIG.scope)).snapshot.remote()
    return dict(ray.get(ref)["limits"])


def _queued() -> dict[str, int]:
    import ray

    ref: Any = ray.get_actor(actor_name(CONFIG.scope)).snapshot.remote()
    return dict(ray.get(ref)["queued"])


def _until_queued(pages: int, within_s: float = 60.0) -> None:
    until = time.monotonic() + within_s
    while sum(_queued().values()) < pages:
        assert time.monotonic() < until, f"never {pages} pages queued"
        time.sleep(0.02)


def _pages_ok(text: str) -> float:
    for line in text.splitlines():
        if line.startswith('fenceline_ocr_pages_total{outcome="ok"}'):
            return float(line.split()[-1])
    return 0.0
