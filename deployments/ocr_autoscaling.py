"""How many OCR replicas run: the pool's ``autoscaling:`` section and its rule.

OCR replicas are plain Ray actors the runtime supervisor creates (not a Serve
deployment), so Serve's autoscaler never sees them; the supervisor's OCR fleet
(``cluster/ocr_fleet.py``) applies :func:`decide` every tick to the OCR admission
scope's own numbers:

* **waiting** — pages in a driver's hand waiting for a grant: the scope's queued
  tickets, the same pages ``fenceline_ocr_pages_waiting`` counts in each driver, plus
  the pages each queued ask's document still holds behind it (a driver asks for a
  document's pages one at a time, so a long document alone is one queued ask with
  its backlog: :func:`scope_demand`);
* **in flight** — pages granted and out on a replica.

A replica reads one page at a time, so ``demand = waiting + in_flight`` is the number
of replicas that would read every page in hand at once. Rules (``current`` = running
replicas):

* **Up** when ``demand > current × (1 + target_waiting_per_replica)``, to
  ``ceil(demand / (1 + target_waiting_per_replica))`` (at least one more);
* **Down** when ``demand <= current × downscale_fraction``, to
  ``ceil(demand / downscale_fraction)``: the pool lands inside the band, so the next
  tick holds instead of scaling back up;
* **Hold** in between; always clamped to ``min_replicas``..``max_replicas``.

Time hysteresis (``upscale_delay_s``, ``downscale_delay_s``: a proposal must persist
that long) is :class:`HeldProposal`, which the fleet consults each pass, as Serve's
delays are for the engines. Pure: no Ray, no clock of its own (unit-tested in
``tests/unit/test_ocr_autoscaling.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class OcrAutoscaling(BaseModel):
    """The OCR pool's ``autoscaling:`` section; replaces a fixed replica count.

    The pool starts at its ``replicas`` and moves within ``min_replicas``..
    ``max_replicas``; the OCR scope's page budget follows the running replicas.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(1, ge=1)
    #: Pages waiting for a grant per running replica above which a replica is added.
    target_waiting_per_replica: float = Field(1.0, ge=0)
    #: Scale down only when the pages in hand are at most this share of the replicas.
    downscale_fraction: float = Field(0.5, gt=0, lt=1)
    #: Seconds a proposal must persist before the fleet acts on it.
    upscale_delay_s: float = Field(0.0, ge=0)
    downscale_delay_s: float = Field(120.0, ge=0)
    #: Seconds between two reads of the scope.
    interval_s: float = Field(5.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> OcrAutoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas < min_replicas")
        return self


def scope_demand(snapshot: Mapping[str, Any]) -> tuple[int, int]:
    """``(waiting, in_flight)`` pages from an OCR admission scope's snapshot."""
    queued = sum(int(n) for n in snapshot["queued"].values())
    return queued + int(snapshot.get("queued_backlog", 0)), int(snapshot["in_flight"])


def decide(config: OcrAutoscaling, current: int, waiting: int, in_flight: int) -> int:
    """The replica count the pool should run (see the module docstring for the rules).

    Args:
        config: the pool's targets and bounds.
        current: replicas running now.
        waiting: pages waiting for a grant (the scope's queue).
        in_flight: pages granted and out on replicas.
    """
    if current < 0 or waiting < 0 or in_flight < 0:
        raise ValueError("counts must be non-negative")
    demand = waiting + in_flight
    per_replica = 1.0 + config.target_waiting_per_replica
    want = current
    if demand > current * per_replica:
        want = max(current + 1, math.ceil(demand / per_replica))
    elif demand <= current * config.downscale_fraction:
        want = math.ceil(demand / config.downscale_fraction)
    return min(config.max_replicas, max(config.min_replicas, want))


class HeldProposal:
    """Time hysteresis: a replica count the fleet acts on only once :func:`decide` has
    proposed it for ``upscale_delay_s`` (growing) or ``downscale_delay_s`` (shrinking)
    without a break; a pass that holds, or proposes another count, starts it over."""

    def __init__(self, config: OcrAutoscaling) -> None:
        self.config = config
        #: The count proposed and since when.
        self._since: tuple[int, float] | None = None

    def ready(self, current: int, want: int, now: float) -> bool:
        """Whether to move from ``current`` to ``want`` replicas at ``now`` (seconds)."""
        if want == current:
            self._since = None
            return False
        if self._since is None or self._since[0] != want:
            self._since = (want, now)
        delay = self.config.upscale_delay_s if want > current else self.config.downscale_delay_s
        if now - self._since[1] < delay:
            return False
        self._since = None
        return True
