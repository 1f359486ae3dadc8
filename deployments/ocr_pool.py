"""The OCR pool's replicas: Ray actors on CPU workers that recognise one page each.

Tesseract is CPU work on a different scale from the LLM pools (seconds a page, one
core each), so it runs apart from them and scales by its own numbers. This module is
the pool itself, beside the engine pools it is apart from:

* :class:`OcrReplica` is one Ray actor that recognises one page at a time
  (:func:`pipeline.documents.ocr_images`, the same code the embedded run calls in
  process). Replicas are named ``<prefix>-ocr-<i>``, each asking ``num_cpus`` and one
  unit of the custom resource ``resource`` (``fenceline-ocr``), which only KubeRay's
  OCR worker group offers (``kuberay/``): Ray places them there, never on the GPU
  nodes. The runtime supervisor creates and health-checks them, and its OCR fleet
  (``cluster/ocr_fleet.py``) moves their number between the pool's bounds on the
  admission scope's queue (:mod:`deployments.ocr_autoscaling`).
* Metrics (prometheus-client, carried into Ray's metrics agent by
  :func:`deployments.ray_metrics.bridge_to_ray` like the engine's and admission's):
  ``fenceline_ocr_pages_total{outcome}`` and ``fenceline_ocr_page_seconds`` from the
  replicas; ``fenceline_ocr_pages_waiting`` (pages in hand waiting for a grant) and
  ``fenceline_ocr_page_wait_seconds`` (how long each waited) from the drivers. Pages per
  second is ``rate(ray_fenceline_ocr_pages_total[1m])``.

The drivers' side (a grant per page from the OCR admission scope, then a replica) is
``cluster/ocr_client.py``: it needs the admission actor, which is ``cluster``'s. The
pool is declared in the pools file (``ocr:``, :class:`deployments.pools.OcrPoolConfig`)
and travels to the drivers in ``RuntimeConfig.ocr``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from deployments.pools import OCR_RESOURCE, OcrPoolConfig
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.documents import OcrPage, ocr_images
from pipeline.errors import FencelineError
from pipeline.settings import Settings

__all__ = [
    "OCR_RESOURCE",
    "OcrMetrics",
    "OcrPoolConfig",
    "OcrReplica",
    "build_ocr_replica",
    "replica_name",
]


def replica_name(prefix: str, index: int) -> str:
    return f"{prefix}-ocr-{index}"


class OcrMetrics:
    """The pool's prometheus metrics, in a registry of their own (one per process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pages = Counter(
            "fenceline_ocr_pages",
            "Pages OCR'd by the pool, by outcome (ok or the error class)",
            ["outcome"],
            registry=self.registry,
        )
        self.page_seconds = Histogram(
            "fenceline_ocr_page_seconds",
            "Seconds one page took on a replica (orientation and recognition)",
            buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
            registry=self.registry,
        )
        self.waiting = Gauge(
            "fenceline_ocr_pages_waiting",
            "Pages in a driver's hand waiting for an OCR grant (the pool's queue)",
            registry=self.registry,
        )
        self.page_wait_seconds = Histogram(
            "fenceline_ocr_page_wait_seconds",
            "Seconds a page waited in a driver's hand for its OCR grant (fair share by tenant)",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
            registry=self.registry,
        )


class OcrReplica:
    """One OCR replica: recognises a page with the caller's settings (Ray actor body)."""

    def __init__(self) -> None:
        self.metrics = OcrMetrics()
        self._bridge: RegistryBridge | None = None
        self._one_page: asyncio.Semaphore | None = None  # made on the actor's loop
        self._in_hand = 0

    async def start(self) -> bool:
        """Start the metrics bridge (on this actor's loop); idempotent."""
        if self._bridge is None:
            self._bridge = bridge_to_ray(self.metrics.registry)
        return True

    async def ocr(
        self,
        number: int,
        image: Any,
        dpi: float | None,
        settings: Settings,
        grant: tuple[Any, str] | None = None,
    ) -> OcrPage:
        """The page recognised as :func:`ocr_images` does in process (same errors).

        ``grant`` is the page's admission grant as (the scope's actor, the grant id):
        the replica gives it back the moment the page is read (or fails, or is
        cancelled), so the scope's budget counts pages on replicas, not pages whose
        driver has yet to collect them.
        """
        await self.start()
        if self._one_page is None:
            self._one_page = asyncio.Semaphore(1)
        self._in_hand += 1
        try:
            async with self._one_page:  # one page at a time: the replica's CPU
                t0 = time.monotonic()
                outcome = "ok"
                try:
                    (page,) = await asyncio.to_thread(ocr_images, [(number, image, dpi)], settings)
                except FencelineError as exc:
                    outcome = exc.error_class
                    raise
                finally:
                    self.metrics.pages.labels(outcome=outcome).inc()
                    self.metrics.page_seconds.observe(time.monotonic() - t0)
        finally:
            self._in_hand -= 1
            if grant is not None:
                scope, grant_id = grant
                scope.release.remote(grant_id)
        return page

    async def in_hand(self) -> int:
        """Pages on this replica now, read or waiting: drivers send to the emptiest."""
        return self._in_hand

    def metrics_text(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.metrics.registry).decode()


def build_ocr_replica(
    config: OcrPoolConfig, name: str, *, namespace: str | None = None, detached: bool = True
) -> Any:
    """Get or create the named replica (not started: call ``start.remote()``).

    Pages run one at a time (a semaphore in :meth:`OcrReplica.ocr`: the replica's
    CPU); ``max_concurrency`` only lets pages sent by several drivers wait inside it,
    so a health ping never queues behind them and gets the replica replaced.
    """
    import ray

    options: dict[str, Any] = {
        "name": name,
        "get_if_exists": True,
        "num_cpus": config.num_cpus,
        "max_concurrency": 64,
        "max_restarts": -1,
        "max_task_retries": 0,  # a page's failure is the page's: the driver decides
    }
    if config.resource:
        options["resources"] = {config.resource: 1}
    if namespace is not None:
        options["namespace"] = namespace
    if detached:
        options["lifetime"] = "detached"
    return ray.remote(OcrReplica).options(**options).remote()
