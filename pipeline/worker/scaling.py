"""How many task drivers to run: a pure decision on backlog age and admission headroom.

:func:`decide` takes what the job store and the admission scope say now
(:class:`ScalingSignal`) and what it decided before (:class:`ScalingState`) and
returns the desired driver count with its reason. It reads no clock and does no
I/O, so every rule below is unit-tested on its own
(``tests/unit/test_driver_scaling.py``); :mod:`pipeline.worker.fleet` feeds it
and carries the decision out, and the runtime supervisor runs that loop over
its Ray driver actors.

Rules (in this order):

* **Bounds.** Fewer drivers than ``min_drivers`` (one died, the runtime just
  started) goes to the minimum at once; more than ``max_drivers`` (the setting
  was lowered) drains down to it.
* **Up on age.** When the oldest runnable job has waited ``scale_up_age_seconds``
  or more, drivers are added to cover the backlog:
  ``ceil((running + runnable) / concurrency)``, at least one more, at most
  ``max_drivers``. Age, not count, because a backlog the drivers keep up with is
  not a reason to scale: only work that waits is.
* **Not into a full budget.** If the admission scope's headroom (the free share
  of its tightest limit: permits, concurrent tokens, RPM, TPM; 0 during a shared
  429 cooldown) is below ``min_headroom``, no driver is added: a new driver would
  only hold leases waiting for budget the existing ones already wait for.
  Unknown headroom (no scope, or the actor did not answer) does not block.
* **Down when drained.** Only after the backlog has stayed drained (no runnable
  job older than ``scale_down_age_seconds``) for ``scale_down_idle_seconds``,
  the count drops to what the running leases need, never below the minimum.
* **Hysteresis and cooldown.** The up threshold is far above the drained one, a
  drain must last a whole idle window, and no change follows another within
  ``cooldown_seconds`` (except to restore the minimum), so a backlog oscillating
  around one threshold cannot make the count flap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ScalingConfig:
    """Bounds and thresholds of driver autoscaling (``Settings.driver_*``)."""

    min_drivers: int = 2
    max_drivers: int = 8
    #: Oldest runnable job age (s) at or above which drivers are added.
    scale_up_age_seconds: float = 10.0
    #: The backlog counts as drained while no runnable job is older than this (s).
    scale_down_age_seconds: float = 1.0
    #: How long the backlog must stay drained before drivers are removed (s).
    scale_down_idle_seconds: float = 30.0
    #: Least gap between two changes of the count (s).
    cooldown_seconds: float = 15.0
    #: Free share of the admission scope's tightest limit needed to add a driver.
    min_headroom: float = 0.05

    def __post_init__(self) -> None:
        if not 1 <= self.min_drivers <= self.max_drivers:
            raise ValueError("need 1 <= min_drivers <= max_drivers")
        if self.scale_down_age_seconds >= self.scale_up_age_seconds:
            raise ValueError("scale_down_age_seconds must be below scale_up_age_seconds")
        if min(self.scale_down_idle_seconds, self.cooldown_seconds) < 0:
            raise ValueError("idle and cooldown seconds must be >= 0")
        if not 0 <= self.min_headroom <= 1:
            raise ValueError("min_headroom is a share, 0..1")

    @classmethod
    def from_settings(cls, settings: Any, *, default_max: int) -> ScalingConfig:
        """The ``driver_*`` fields of :class:`pipeline.settings.Settings`;
        ``default_max`` where ``driver_max`` is unset (the runtime's driver count).
        A minimum above the maximum is lowered to it."""
        top = settings.driver_max or default_max
        return cls(
            min_drivers=min(settings.driver_min, top),
            max_drivers=top,
            scale_up_age_seconds=settings.driver_scale_up_age_seconds,
            scale_down_age_seconds=settings.driver_scale_down_age_seconds,
            scale_down_idle_seconds=settings.driver_scale_down_idle_seconds,
            cooldown_seconds=settings.driver_scale_cooldown_seconds,
            min_headroom=settings.driver_scale_min_headroom,
        )


@dataclass(frozen=True)
class ScalingSignal:
    """What the decision reads, all taken at ``now`` (seconds on a monotonic clock)."""

    now: float
    drivers: int
    #: Leases one driver holds at most.
    concurrency: int
    #: Age (s) of the oldest runnable job; None when nothing is runnable.
    oldest_runnable_age: float | None
    runnable: int
    running: int
    #: Free share (0..1) of the admission scope's tightest limit; None: unknown.
    headroom: float | None = None


@dataclass(frozen=True)
class ScalingState:
    """What :func:`decide` remembers between calls."""

    #: When the count last changed (None: never).
    changed_at: float | None = None
    #: Since when the backlog has been drained without a break (None: not drained).
    drained_since: float | None = None


@dataclass(frozen=True)
class ScalingDecision:
    desired: int
    #: ``hold``, ``below_min``, ``above_max``, ``backlog_age``, ``drained``,
    #: ``no_headroom``, ``cooldown``, ``at_max``.
    reason: str
    state: ScalingState

    def changes(self, current: int) -> bool:
        return self.desired != current


def decide(config: ScalingConfig, signal: ScalingSignal, state: ScalingState) -> ScalingDecision:
    """The desired driver count now; see the module docstring for the rules."""
    s = signal
    drained = s.oldest_runnable_age is None or s.oldest_runnable_age < config.scale_down_age_seconds
    state = replace(
        state,
        drained_since=(
            (state.drained_since if state.drained_since is not None else s.now) if drained else None
        ),
    )

    def to(desired: int, reason: str) -> ScalingDecision:
        if desired == s.drivers:
            return ScalingDecision(desired, reason, state)
        return ScalingDecision(desired, reason, replace(state, changed_at=s.now))

    if s.drivers < config.min_drivers:
        return to(config.min_drivers, "below_min")
    cooling = state.changed_at is not None and s.now - state.changed_at < config.cooldown_seconds
    if s.drivers > config.max_drivers:
        return to(s.drivers, "cooldown") if cooling else to(config.max_drivers, "above_max")
    per = max(1, s.concurrency)
    age = s.oldest_runnable_age if s.runnable > 0 else None
    if age is not None and age >= config.scale_up_age_seconds:
        if s.drivers >= config.max_drivers:
            return to(s.drivers, "at_max")
        if s.headroom is not None and s.headroom < config.min_headroom:
            return to(s.drivers, "no_headroom")
        if cooling:
            return to(s.drivers, "cooldown")
        need = math.ceil((s.running + s.runnable) / per)
        return to(min(config.max_drivers, max(s.drivers + 1, need)), "backlog_age")
    if (
        state.drained_since is not None
        and s.now - state.drained_since >= config.scale_down_idle_seconds
    ):
        keep = max(config.min_drivers, math.ceil(s.running / per))
        if keep < s.drivers:
            return to(s.drivers, "cooldown") if cooling else to(keep, "drained")
    return to(s.drivers, "hold")


def headroom(snapshot: Mapping[str, Any]) -> float | None:
    """Free share (0..1) of an admission scope's tightest limit, from its snapshot.

    ``snapshot`` is what ``AdmissionActor.snapshot()`` returns (``limits`` and the
    counts in use). A shared 429 cooldown leaves no headroom; a scope that sets no
    limit has unknown (unbounded) headroom, None.
    """
    if float(snapshot.get("cooldown_remaining") or 0) > 0:
        return 0.0
    limits = snapshot.get("limits") or {}
    used = {
        "max_in_flight": snapshot.get("in_flight", 0),
        "max_concurrent_tokens": snapshot.get("in_flight_tokens", 0),
        "rpm": snapshot.get("window_requests", 0),
        "tpm": snapshot.get("window_tokens", 0),
    }
    shares = [
        max(0.0, 1.0 - float(used[name]) / float(limit))
        for name, limit in limits.items()
        if name in used and limit
    ]
    return min(shares) if shares else None


def best_headroom(values: list[float | None]) -> float | None:
    """The headroom of a runtime with several scopes (one per engine): the largest.

    A driver added while any engine has room makes progress on that engine's jobs,
    so only when every scope is full does the budget block a scale-up. Unknown
    scopes are left out; all unknown is None.
    """
    known = [v for v in values if v is not None]
    return max(known) if known else None
