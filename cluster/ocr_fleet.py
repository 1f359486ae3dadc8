"""The OCR replicas of a runtime supervisor, scaled on the OCR scope's queue.

Like the drivers (``cluster/driver_fleet.py``) and unlike the engines, OCR replicas
are detached actors the supervisor creates, names and health-checks, so their
autoscaling is a loop in the supervisor, not a Serve policy. Each pass
(:meth:`OcrFleet.run_once`) reads the OCR admission scope's snapshot — pages waiting
for a grant (the scope's queue: what ``fenceline_ocr_pages_waiting`` counts in each
driver, plus the pages each queued ask's document still holds behind it) and pages
in flight — and applies :func:`deployments.ocr_autoscaling.decide`
once the proposal has held for the section's up- or downscale delay:

* **up**: the new replicas ``<prefix>-ocr-<i>`` (the next indices) are created and
  started, then the scope's page budget grows to match, so a page is only granted
  when a replica can take it;
* **down**: the budget shrinks first, then the highest-indexed replicas go. A page
  that was on one of them comes back to its driver as a dead actor's, and the driver
  sends it once more to a replica still running (``cluster/ocr_client.py``): the page
  loses the seconds it had run, never its document's attempt. The downscale delay
  (minutes by default) keeps this rare.

Invariant: the replicas run are ``<prefix>-ocr-0`` .. ``-<n-1>``, ``n`` within the
section's bounds, and the scope's budget is ``pages_budget(n)`` after every pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from cluster.actor_kill import kill_actor
from cluster.driver_fleet import SNAPSHOT_TIMEOUT_S, Member
from deployments.ocr_autoscaling import HeldProposal, decide, scope_demand
from deployments.pools import OcrPoolConfig
from pipeline.periodic import PeriodicPass
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Member)


class OcrFleet(PeriodicPass, Generic[M]):
    """Adds and removes the ``<prefix>-ocr-<i>`` members of a supervisor.

    The supervisor hands over its member list, the lock its health checks hold, the
    name of the OCR scope's member, and two callbacks: ``new_replica`` (the member
    for replica ``i``) and ``ensure`` (create and start a member).
    """

    pass_name = "ocr autoscaling"

    def __init__(
        self,
        config: OcrPoolConfig,
        members: list[M],
        lock: asyncio.Lock,
        *,
        scope_member: str,
        new_replica: Callable[[int], M],
        ensure: Callable[[M], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if config.autoscaling is None:
            raise ValueError("the OCR pool has no autoscaling section")
        self.config = config
        self.scaling = config.autoscaling
        self.members = members
        self.lock = lock
        self.scope_member = scope_member
        self.new_replica = new_replica
        self.ensure = ensure
        self.clock = clock
        self._held = HeldProposal(self.scaling)
        #: The last pass's numbers (operators: the supervisor's status).
        self.last: dict[str, int] = {}

    def pass_interval(self) -> float:
        return self.scaling.interval_s

    def replicas(self) -> list[M]:
        return sorted((m for m in self.members if "-ocr-" in m.name), key=lambda m: _index(m.name))

    async def run_once(self) -> int:
        """Read the scope, decide, and act once the proposal has held long enough;
        returns the replicas running after the pass."""
        scope = await self._scope_handle()
        snap = await _call(scope.snapshot.remote())
        waiting, in_flight = scope_demand(snap)
        current = len(self.replicas())
        if snap["limits"].get("max_in_flight") != self.config.pages_budget(current):
            # Replicas adopted from an earlier supervisor, or a resize that did not land.
            await _call(scope.resize.remote(self.config.pages_budget(current)))
        want = decide(self.scaling, current, waiting, in_flight)
        self.last = {"replicas": current, "waiting": waiting, "in_flight": in_flight, "want": want}
        if not self._held.ready(current, want, self.clock()):
            return current
        if want > current:
            await self._grow(scope, current, want)
        else:
            await self._shrink(scope, want)
        return len(self.replicas())

    async def _grow(self, scope: Any, current: int, want: int) -> None:
        async with self.lock:
            for i in range(current, want):
                member = self.new_replica(i)
                self.members.append(member)
                await self.ensure(member)
        await _call(scope.resize.remote(self.config.pages_budget(want)))
        log.info("ocr replicas %d -> %d", current, want)

    async def _shrink(self, scope: Any, want: int) -> None:
        await _call(scope.resize.remote(self.config.pages_budget(want)))
        async with self.lock:  # out of the member list: no health check revives them
            for member in reversed(self.replicas()[want:]):
                self.members.remove(member)
                if member.handle is not None:
                    kill_actor(member.handle)
                    member.handle = None
                log.info("ocr replica %s removed", member.name)

    async def _scope_handle(self) -> Any:
        for member in self.members:
            if member.name == self.scope_member and member.handle is not None:
                return member.handle
        raise RuntimeError(f"the OCR scope {self.scope_member} is not running")


async def start_ocr_fleet(
    config: OcrPoolConfig | None,
    members: list[M],
    lock: asyncio.Lock,
    new_replica: Callable[[int], M],
    ensure: Callable[[M], Awaitable[None]],
) -> OcrFleet[M] | None:
    """Start scaling the OCR replicas; None without an OCR pool or its ``autoscaling:``."""
    if config is None or config.autoscaling is None:
        return None
    fleet = OcrFleet(
        config,
        members,
        lock,
        scope_member=f"admission-{config.scope}",
        new_replica=new_replica,
        ensure=ensure,
    )
    await fleet.start()
    log.info("ocr autoscaling %d..%d", config.autoscaling.min_replicas, config.max_replicas)
    return fleet


def _index(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


async def _call(ref: Any) -> Any:
    return await wait_within(asyncio.wrap_future(ref.future()), SNAPSHOT_TIMEOUT_S)
