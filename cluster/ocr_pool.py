"""OCR as its own Ray pool: replicas on CPU workers, admitted page by page.

Tesseract is CPU work on a different scale from the LLM pools (seconds a page, one
core each), so it runs apart from them and scales by its own numbers:

* :class:`OcrReplica` is one Ray actor that recognises one page at a time
  (:func:`pipeline.documents.ocr_images`, the same code the embedded run calls in
  process). There are ``replicas`` of them, ``<prefix>-ocr-<i>``, each asking
  ``num_cpus`` and one unit of the custom resource ``resource`` (``fenceline-ocr``),
  which only KubeRay's OCR worker group offers (``kuberay/``): Ray places them there,
  never on the GPU nodes. The runtime supervisor creates and health-checks them.
* :class:`RayOcrPool` is the document stage's :data:`~pipeline.documents.PageOcr`
  in a driver: each page first takes a grant from the OCR admission scope
  (:meth:`OcrPoolConfig.admission`: a concurrency budget in pages, ``max_in_flight``,
  in its own :class:`~cluster.admission.AdmissionActor`, so OCR never spends an LLM
  scope's token budget and an LLM burst never holds pages back), then goes to a
  replica; one document's pages run on several replicas at once and come back in
  page order. The grant is released as its page returns.
* Metrics (prometheus-client, carried into Ray's metrics agent by
  :func:`deployments.ray_metrics.bridge_to_ray` like the engine's and admission's):
  ``fenceline_ocr_pages_total{outcome}`` and ``fenceline_ocr_page_seconds`` from the
  replicas, ``fenceline_ocr_pages_waiting`` (pages in hand waiting for a grant) from
  the drivers. Pages per second is ``rate(ray_fenceline_ocr_pages_total[1m])``.

The pool is declared in the pools file (``ocr:``, :class:`deployments.pools.OcrPoolConfig`)
and travels to the drivers in ``RuntimeConfig.ocr``.

Failures keep the document stage's meanings: a page's own error (``ocr_page_timeout``,
``image_too_large``, ``ocr_unavailable`` on a replica without tesseract) is raised as
itself; a pool that cannot be reached (no replica, no admission actor, a replica that
died mid-page) is :class:`~pipeline.errors.OcrUnavailable` (retryable); pages still
out when ``document_read_seconds`` pass end the read with ``document_read_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cluster.admission import actor_name
from deployments.pools import OCR_RESOURCE, OcrPoolConfig
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.admission import AdmissionRequest, Grant
from pipeline.documents import OcrPage, PageInput, ocr_images
from pipeline.errors import DocumentReadTimeout, FencelineError, OcrUnavailable
from pipeline.settings import Settings

__all__ = [
    "OCR_RESOURCE",
    "OcrMetrics",
    "OcrPoolConfig",
    "OcrReplica",
    "RayOcrPool",
    "build_ocr_replica",
    "replica_name",
]

log = logging.getLogger(__name__)

#: Seconds a driver waits on the admission actor's answer beyond the wait it asked for.
_ACTOR_SLACK_S = 30.0
#: How long one acquire waits while pages of the same document are out (then their
#: finished grants are released, so a document longer than the budget never blocks).
_ACQUIRE_SLICE_S = 0.2


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


class OcrReplica:
    """One OCR replica: recognises a page with the caller's settings (Ray actor body)."""

    def __init__(self) -> None:
        self.metrics = OcrMetrics()
        self._bridge: RegistryBridge | None = None
        self._one_page: asyncio.Semaphore | None = None  # made on the actor's loop

    async def start(self) -> bool:
        """Start the metrics bridge (on this actor's loop); idempotent."""
        if self._bridge is None:
            self._bridge = bridge_to_ray(self.metrics.registry)
        return True

    async def ocr(self, number: int, image: Any, dpi: float | None, settings: Settings) -> OcrPage:
        """The page recognised as :func:`ocr_images` does in process (same errors)."""
        await self.start()
        if self._one_page is None:
            self._one_page = asyncio.Semaphore(1)
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
        return page

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


class RayOcrPool:
    """:data:`~pipeline.documents.PageOcr` over the replicas, one grant per page.

    Called from the document stage's thread (``read_document`` runs off the event
    loop), so it blocks on Ray as it goes.
    """

    def __init__(
        self, config: OcrPoolConfig, *, prefix: str = "fenceline", tenant: str = "ocr"
    ) -> None:
        self.config = config
        self.prefix = prefix
        self.tenant = tenant
        self.metrics = OcrMetrics()
        self._turn = itertools.count()

    def _actor(self, name: str) -> Any:
        import ray

        try:
            return ray.get_actor(name)
        except ValueError as exc:
            raise OcrUnavailable(f"OCR pool actor {name} is not running") from exc

    def __call__(self, pages: Iterable[PageInput], settings: Settings) -> tuple[OcrPage, ...]:
        import ray

        deadline = time.monotonic() + settings.document_read_seconds
        admission = self._actor(actor_name(self.config.scope))
        pending: dict[Any, tuple[int, Grant]] = {}
        done: dict[int, OcrPage] = {}
        try:
            for number, image, dpi in pages:
                self.metrics.waiting.inc()
                try:
                    grant = self._acquire(admission, pending, done, deadline, settings)
                finally:
                    self.metrics.waiting.dec()
                try:
                    index = next(self._turn) % self.config.replicas
                    replica = self._actor(replica_name(self.prefix, index))
                    pending[replica.ocr.remote(number, image, dpi, settings)] = (number, grant)
                except BaseException:  # granted, never sent: the page is not out
                    admission.release.remote(grant.grant_id, attempted=False)
                    raise
            while pending:
                self._collect(admission, pending, done, deadline, settings, block=True)
        except ray.exceptions.RayActorError as exc:
            raise OcrUnavailable(f"an OCR pool actor died: {exc}") from exc
        finally:
            for ref, (_number, grant) in pending.items():  # an error or the time limit
                admission.release.remote(grant.grant_id, attempted=False)
                with contextlib.suppress(Exception):  # it may have finished meanwhile
                    ray.cancel(ref)
        return tuple(done[number] for number in sorted(done))

    def _acquire(
        self,
        admission: Any,
        pending: dict[Any, tuple[int, Grant]],
        done: dict[int, OcrPage],
        deadline: float,
        settings: Settings,
    ) -> Grant:
        import ray

        request = AdmissionRequest(tenant=self.tenant, prompt_tokens=1, max_output_tokens=0)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DocumentReadTimeout(
                    seconds=settings.document_read_seconds, pages_read=len(done)
                )
            wait = min(left, _ACQUIRE_SLICE_S if pending else 5.0)
            try:
                got = ray.get(
                    admission.acquire.remote(request, timeout=wait), timeout=wait + _ACTOR_SLACK_S
                )
            except ray.exceptions.GetTimeoutError as exc:
                raise OcrUnavailable("the OCR admission scope did not answer") from exc
            if isinstance(got, Grant):
                return got
            # Not granted: pages of this document may be what holds the budget.
            self._collect(admission, pending, done, deadline, settings, block=False)

    def _collect(
        self,
        admission: Any,
        pending: dict[Any, tuple[int, Grant]],
        done: dict[int, OcrPage],
        deadline: float,
        settings: Settings,
        *,
        block: bool,
    ) -> None:
        """Take the pages that are back (at least one when ``block``), releasing
        their grants; a page's error is raised as itself."""
        import ray

        if not pending:
            return
        left = max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(
            list(pending), num_returns=1 if block else len(pending), timeout=(left if block else 0)
        )
        if block and not ready:
            raise DocumentReadTimeout(seconds=settings.document_read_seconds, pages_read=len(done))
        for ref in ready:
            number, grant = pending.pop(ref)
            admission.release.remote(grant.grant_id)
            try:
                done[number] = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, Exception):
                    raise cause from None
                raise
