"""The drivers' side of the OCR pool: a grant per page, shared fairly by tenant, then
a replica.

:class:`RayOcrPool` is the document stage's :data:`~pipeline.documents.PageOcr` in a
driver (the replicas themselves are ``deployments/ocr_pool.py``):

* each page first takes a grant from the OCR admission scope
  (:meth:`~deployments.pools.OcrPoolConfig.admission`: a budget in pages,
  ``max_in_flight``, in its own :class:`~cluster.admission.AdmissionActor`, so OCR
  never spends an LLM scope's token budget and an LLM burst never holds pages back).
  The page asks as its document's **tenant** (:meth:`RayOcrPool.for_tenant`): the
  scope queues waiters per tenant and serves them by deficit round robin, one page
  per tenant per round, so a tenant's 500-page upload holds another tenant's next page
  back by one page per waiting tenant, not by its 500. A driver asks once per page and
  stays queued until granted (a ticket withdrawn and asked again would lose its turn);
* then goes to the running replica with the fewest pages in hand (the fleet scales
  them); one document's pages run on several replicas at once and come back
  in page order. A replica that is gone when its page comes back (removed by the
  fleet, or crashed) gets the page sent once more to another. The replica gives the
  grant back the moment it has read the page, so the budget counts pages on replicas
  and a document longer than the budget never waits on its own driver.

Failures keep the document stage's meanings: a page's own error (``ocr_page_timeout``,
``image_too_large``, ``ocr_unavailable`` on a replica without tesseract) is raised as
itself; a pool that cannot be reached (no replica, no admission actor, a page whose
second replica died too) is :class:`~pipeline.errors.OcrUnavailable` (retryable);
pages still out when ``document_read_seconds`` pass end the read with
``document_read_timeout``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from cluster.admission import actor_name
from deployments.ocr_pool import OcrMetrics, replica_name
from deployments.pools import OcrPoolConfig
from pipeline.admission import AdmissionRequest, Grant
from pipeline.documents import OcrPage, PageInput, pages_behind
from pipeline.errors import DocumentReadTimeout, OcrUnavailable
from pipeline.settings import Settings

__all__ = ["RayOcrPool"]

#: Seconds a driver waits on the admission actor's answer beyond the wait it asked for.
_ACTOR_SLACK_S = 30.0
#: How long the list of running replicas is trusted before it is looked up again.
_LIVE_TTL_S = 5.0
#: How long the replicas may take to say how many pages they hold.
_ASK_S = 5.0


@dataclass(frozen=True)
class _Out:
    """A page out on a replica: its grant, and the input to send again if need be."""

    number: int
    grant: Grant
    page: PageInput
    resent: bool = False


class _Replicas:
    """The running replicas' handles, looked up at most every ``_LIVE_TTL_S``.

    Shared by a pool and its tenant views: one round robin per driver.
    """

    def __init__(self, prefix: str, max_replicas: int) -> None:
        self.prefix = prefix
        self.max_replicas = max_replicas
        self.turn = itertools.count()
        self._live: list[Any] = []
        self._at = -math.inf

    def forget(self) -> None:
        self._at = -math.inf

    def next(self) -> Any:
        """The running replica with the fewest pages in hand (round robin among equals).

        Drivers send independently, so a round robin of its own per driver would put
        two pages on one replica while another idles; asking each replica costs a
        millisecond a page, a page seconds.
        """
        import ray

        if time.monotonic() - self._at > _LIVE_TTL_S or not self._live:
            live = []
            for i in range(self.max_replicas):
                with contextlib.suppress(ValueError):  # not running (scaled down)
                    live.append(ray.get_actor(replica_name(self.prefix, i)))
            self._live, self._at = live, time.monotonic()
        live = self._live
        if not live:
            raise OcrUnavailable(f"no OCR replica {replica_name(self.prefix, 0)}.. is running")
        turn = next(self.turn)
        order = [live[(turn + k) % len(live)] for k in range(len(live))]
        try:
            in_hand: list[int] = ray.get([r.in_hand.remote() for r in order], timeout=_ASK_S)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            self.forget()  # one is gone or busy beyond reach: the round robin's pick
            return order[0]
        return order[min(range(len(order)), key=in_hand.__getitem__)]


class RayOcrPool:
    """:data:`~pipeline.documents.PageOcr` over the replicas, one grant per page.

    Called from the document stage's thread (``read_document`` runs off the event
    loop), so it blocks on Ray as it goes. Pages ask as ``tenant``; a driver reads
    each document through :meth:`for_tenant` of its document's tenant.
    """

    def __init__(
        self,
        config: OcrPoolConfig,
        *,
        prefix: str = "fenceline",
        tenant: str = "ocr",
        metrics: OcrMetrics | None = None,
        replicas: _Replicas | None = None,
    ) -> None:
        self.config = config
        self.prefix = prefix
        self.tenant = tenant
        self.metrics = metrics or OcrMetrics()
        self._replicas = replicas or _Replicas(prefix, config.max_replicas)

    def for_tenant(self, tenant: str) -> RayOcrPool:
        """The same pool (metrics, replicas, round robin) asking as ``tenant``."""
        return RayOcrPool(
            self.config,
            prefix=self.prefix,
            tenant=tenant,
            metrics=self.metrics,
            replicas=self._replicas,
        )

    def _admission(self) -> Any:
        import ray

        name = actor_name(self.config.scope)
        try:
            return ray.get_actor(name)
        except ValueError as exc:
            raise OcrUnavailable(f"OCR pool actor {name} is not running") from exc

    def __call__(self, pages: Iterable[PageInput], settings: Settings) -> tuple[OcrPage, ...]:
        import ray

        deadline = time.monotonic() + settings.document_read_seconds
        admission = self._admission()
        pending: dict[Any, _Out] = {}
        done: dict[int, OcrPage] = {}
        try:
            for asked, page in enumerate(pages, 1):
                behind = pages_behind(pages, asked)
                grant = self._acquire(admission, deadline, settings, len(done), behind)
                try:
                    pending[self._send(admission, page, grant, settings)] = _Out(
                        page[0], grant, page
                    )
                except BaseException:  # granted, never sent: the page is not out
                    admission.release.remote(grant.grant_id, attempted=False)
                    raise
                # A page's own error ends the read now, not after the last page's grant.
                self._collect(admission, pending, done, deadline, settings, block=False)
            while pending:
                self._collect(admission, pending, done, deadline, settings, block=True)
        except ray.exceptions.RayActorError as exc:
            raise OcrUnavailable(f"an OCR pool actor died: {exc}") from exc
        finally:
            for ref, out in pending.items():  # an error or the time limit
                with contextlib.suppress(Exception):  # it may have finished meanwhile
                    ray.cancel(ref)
                # The replica gives a cancelled page's grant back itself; one never
                # started there would hold it until its TTL, so give it back here too
                # (the scope answers a repeated release with a warning, nothing more).
                admission.release.remote(out.grant.grant_id, attempted=False)
        return tuple(done[number] for number in sorted(done))

    def _send(self, admission: Any, page: PageInput, grant: Grant, settings: Settings) -> Any:
        number, image, dpi = page
        replica = self._replicas.next()
        return replica.ocr.remote(number, image, dpi, settings, (admission, grant.grant_id))

    def _acquire(
        self, admission: Any, deadline: float, settings: Settings, read: int, behind: int
    ) -> Grant:
        """The page's grant, waiting in its tenant's turn until ``deadline``.

        One ask that stays queued, never cancelled and asked again: a ticket asked
        again would join the round behind every tenant already in it and lose its
        turn. Pages already out are given back by their replicas meanwhile. The ask
        carries the ``behind`` pages of its document still to come, so the fleet
        scales for a long document alone, whose pages ask one at a time.
        """
        import ray

        request = AdmissionRequest(
            tenant=self.tenant, prompt_tokens=1, max_output_tokens=0, backlog=behind
        )
        left = deadline - time.monotonic()
        if left <= 0:
            raise DocumentReadTimeout(seconds=settings.document_read_seconds, pages_read=read)
        self.metrics.waiting.inc()
        asked = time.monotonic()
        try:
            got = ray.get(
                admission.acquire.remote(request, timeout=left), timeout=left + _ACTOR_SLACK_S
            )
        except ray.exceptions.GetTimeoutError as exc:
            raise OcrUnavailable("the OCR admission scope did not answer") from exc
        finally:
            self.metrics.waiting.dec()
        self.metrics.page_wait_seconds.observe(time.monotonic() - asked)
        if not isinstance(got, Grant):  # the document's time ran out in the queue
            raise DocumentReadTimeout(seconds=settings.document_read_seconds, pages_read=read)
        return got

    def _collect(
        self,
        admission: Any,
        pending: dict[Any, _Out],
        done: dict[int, OcrPage],
        deadline: float,
        settings: Settings,
        *,
        block: bool,
    ) -> None:
        """Take the pages that are back (at least one when ``block``); a page's error
        is raised as itself, a page whose replica is gone is sent once more to another
        (with its grant, which that replica gives back)."""
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
            out = pending.pop(ref)
            try:
                page = ray.get(ref)
            except ray.exceptions.RayActorError:
                if out.resent:
                    pending[ref] = out  # its grant goes back with the others
                    raise
                self._replicas.forget()  # scaled down or crashed: look again
                resent = self._send(admission, out.page, out.grant, settings)
                pending[resent] = replace(out, resent=True)
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, Exception):
                    raise cause from None
                raise
            done[out.number] = page
