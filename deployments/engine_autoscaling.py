"""How many replicas an engine pool runs: a Serve custom autoscaling policy on vLLM's own signals.

Serve's default policy scales on *ongoing requests per replica*. For a vLLM engine
that number says little: 16 short invoices and 16 80k-token documents are the same
count, yet the second set exhausts the KV cache and vLLM starts preempting. The two
signals that say a replica is full come from vLLM's scheduler, which every replica
reports through ``record_autoscaling_stats``
(:meth:`deployments.engine.PoolEngine.record_autoscaling_stats`):

* **queue depth** — requests waiting in vLLM's scheduler (the batch is full: either
  ``max_num_seqs`` are running or the KV cache has no room for another), plus the
  requests Serve itself holds at its handles for the deployment;
* **KV-cache usage** — the share of KV blocks in use. It rises with the tokens in
  flight, not the request count, so long documents scale the pool before they queue.

:func:`decide` is the pure rule (no Ray, no clock, unit-tested in
``tests/unit/test_engine_autoscaling.py``); :class:`EngineReplicaPolicy` is the thin
glue Serve calls with its ``AutoscalingContext`` every control-loop tick.

Rules (per engine deployment, ``current`` = running replicas):

* **Up** when the waiting requests per replica exceed ``waiting_per_replica`` *or*
  the mean KV usage exceeds ``kv_usage``: to the larger of one more replica, enough
  replicas for the excess queue (each new replica takes one batch, ``max_num_seqs``)
  and ``ceil(current × kv / target)``.
* **Down** only when *both* are at or below ``downscale_fraction`` of their targets:
  to the fewest replicas that would carry the current KV load and sequences at that
  fraction — so the pool lands inside the band and the next tick does not scale
  back up.
* **Hold** in the band between (no flapping); Serve's ``upscale_delay_s`` /
  ``downscale_delay_s`` add time hysteresis on top: a decision must persist that
  long before Serve acts on it.
* **No engine stats yet** (replicas just started): Serve's own rule,
  ``ceil(ongoing / target_ongoing_requests)``.
* Always clamped to the pool's ``min_replicas`` / ``max_replicas``.

Serve pickles this module *by value* into its controller
(``AutoscalingPolicy.serialize_policy``), so it imports the standard library only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: ``record_autoscaling_stats`` keys (Serve's custom metrics, per replica).
WAITING = "engine_waiting"
RUNNING = "engine_running"
KV_USAGE = "engine_kv_usage"
STAT_KEYS = (WAITING, RUNNING, KV_USAGE)

#: ``policy_function`` of the engines' ``autoscaling_config.policy``.
POLICY_PATH = "deployments.engine_autoscaling:EngineReplicaPolicy"

log = logging.getLogger("ray.serve")


@dataclass(frozen=True)
class EngineLoad:
    """One replica's scheduler state, as vLLM last reported it."""

    waiting: float = 0.0
    running: float = 0.0
    #: Fraction of KV-cache blocks in use (0-1).
    kv_usage: float = 0.0

    def stats(self) -> dict[str, float]:
        """The replica's ``record_autoscaling_stats`` answer."""
        return {WAITING: self.waiting, RUNNING: self.running, KV_USAGE: self.kv_usage}


@dataclass(frozen=True)
class EngineTargets:
    """A pool's autoscaling targets (``autoscaling:`` in the pools file)."""

    #: Waiting requests per replica above which the pool scales up.
    waiting_per_replica: float = 2.0
    #: Mean KV-cache usage above which the pool scales up (0-1].
    kv_usage: float = 0.8
    #: "Well below": scale down only when both signals are at or under this share of
    #: their targets (0-1).
    downscale_fraction: float = 0.5
    #: One replica's batch (vLLM ``max_num_seqs``): the requests a new replica absorbs.
    max_num_seqs: int = 16
    #: Serve's own target, used only until replicas report engine stats.
    target_ongoing_requests: float = 16.0

    def __post_init__(self) -> None:
        if self.waiting_per_replica < 0:
            raise ValueError("waiting_per_replica must be >= 0")
        if not 0 < self.kv_usage <= 1:
            raise ValueError("kv_usage must be in (0, 1]")
        if not 0 < self.downscale_fraction < 1:
            raise ValueError("downscale_fraction must be in (0, 1)")
        if self.max_num_seqs < 1 or self.target_ongoing_requests <= 0:
            raise ValueError("max_num_seqs and target_ongoing_requests must be positive")


@dataclass(frozen=True)
class ScaleDecision:
    """The desired replica count and why (logged by the controller, kept in policy state)."""

    replicas: int
    reason: str


def decide(
    loads: Sequence[EngineLoad],
    *,
    current: int,
    targets: EngineTargets,
    min_replicas: int,
    max_replicas: int,
    queued: float = 0.0,
    ongoing: float = 0.0,
) -> ScaleDecision:
    """The replica count an engine deployment should run (see the module rules).

    Args:
        loads: the running replicas that reported engine stats (may be fewer than
            ``current`` while a new replica starts).
        current: running replicas.
        targets: the pool's targets.
        min_replicas: lower bound (inclusive).
        max_replicas: upper bound (inclusive).
        queued: requests Serve holds at its handles for this deployment (not yet
            at any replica); they count as waiting.
        ongoing: Serve's ongoing requests (queued + at replicas), for the fallback.
    """

    def clamp(n: int, reason: str) -> ScaleDecision:
        bounded = max(min_replicas, min(max_replicas, n))
        if bounded != n:
            reason += f"; clamped to [{min_replicas}, {max_replicas}]"
        return ScaleDecision(bounded, reason)

    if current <= 0:
        wanted = 1 if ongoing > 0 or queued > 0 else 0
        return clamp(wanted, "no replica running")
    if not loads:
        wanted = math.ceil(ongoing / targets.target_ongoing_requests)
        return clamp(wanted, f"no engine stats yet: {ongoing:g} ongoing requests")

    waiting = sum(load.waiting for load in loads) + max(queued, 0.0)
    running = sum(load.running for load in loads)
    kv = sum(load.kv_usage for load in loads) / len(loads)
    waiting_per = waiting / current
    seen = f"{waiting_per:.2f} waiting/replica, kv {kv:.2f} on {current}"

    queue_over = waiting_per > targets.waiting_per_replica
    kv_over = kv > targets.kv_usage
    if queue_over or kv_over:
        by_queue = current
        if queue_over:
            excess = waiting - targets.waiting_per_replica * current
            by_queue = current + math.ceil(excess / targets.max_num_seqs)
        by_kv = math.ceil(current * kv / targets.kv_usage) if kv_over else current
        signal = " and ".join(
            name for name, over in (("queue", queue_over), ("kv", kv_over)) if over
        )
        return clamp(max(current + 1, by_queue, by_kv), f"up on {signal}: {seen}")

    f = targets.downscale_fraction
    if waiting_per <= f * targets.waiting_per_replica and kv <= f * targets.kv_usage:
        need_kv = math.ceil(kv * current / (f * targets.kv_usage))
        need_seqs = math.ceil((running + waiting) / (f * targets.max_num_seqs))
        wanted = min(current, max(need_kv, need_seqs))
        if wanted < current:
            return clamp(wanted, f"down, both well below target: {seen}")
        return clamp(current, f"hold, low but needs {current}: {seen}")
    return clamp(current, f"hold in band: {seen}")


def loads_from(
    aggregated: Mapping[str, Mapping[Any, float]] | None, replicas: Sequence[Any]
) -> list[EngineLoad]:
    """Per-replica loads from Serve's aggregated custom metrics (running replicas that
    reported all three stats; the others are skipped, not counted as idle)."""
    if not aggregated:
        return []
    columns = [aggregated.get(key) or {} for key in STAT_KEYS]
    loads = []
    for replica in replicas:
        values = [column.get(replica) for column in columns]
        if any(v is None for v in values):
            continue
        w, r, k = (float(v) for v in values if v is not None)
        loads.append(EngineLoad(waiting=w, running=r, kv_usage=k))
    return loads


class EngineReplicaPolicy:
    """Serve's ``autoscaling_config.policy`` for engine deployments (class-callable).

    Serve instantiates it once per deployment with the policy's ``policy_kwargs``
    (the :class:`EngineTargets` fields) and calls it with an ``AutoscalingContext``
    every control-loop tick; Serve then applies ``upscale_delay_s`` /
    ``downscale_delay_s`` and clamps to ``min_replicas`` / ``max_replicas`` again.
    """

    def __init__(self, **targets: Any) -> None:
        self.targets = EngineTargets(**targets)

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        decision = decide(
            loads_from(ctx.aggregated_metrics, ctx.running_replicas),
            current=ctx.current_num_replicas,
            targets=self.targets,
            min_replicas=ctx.capacity_adjusted_min_replicas,
            max_replicas=ctx.capacity_adjusted_max_replicas,
            queued=float(ctx.total_queued_requests or 0.0),
            ongoing=float(ctx.total_num_requests or 0.0),
        )
        state = dict(ctx.policy_state or {})
        wanted = decision.replicas
        if wanted != state.get("wanted") and wanted != ctx.target_num_replicas:
            # Once per change of mind, not every 0.1 s tick of a pending delay.
            log.info("%s: want %d replicas (%s)", ctx.deployment_name, wanted, decision.reason)
        state["wanted"], state["reason"] = wanted, decision.reason
        return wanted, state
