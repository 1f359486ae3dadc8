"""A pool's ``autoscaling:`` section and the Serve ``autoscaling_config`` it becomes.

Engine replicas scale on vLLM's queue depth and KV-cache usage, not on Serve's
ongoing-request count: the section's targets go to the custom policy
:class:`deployments.engine_autoscaling.EngineReplicaPolicy` as its
``policy_kwargs``, and Serve's own timing knobs (delays, look-back window) pass
through unchanged. The generated KubeRay ``serveConfigV2`` carries the result,
so the cluster runs the same policy as ``fenceline up``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deployments.engine_autoscaling import POLICY_PATH, EngineTargets


class Autoscaling(BaseModel):
    """Serve autoscaling for a pool's engine; replaces a fixed ``replicas`` count.

    Serve keeps the replica count within ``min_replicas``..``max_replicas``; the
    policy adds replicas when waiting requests per replica exceed
    ``target_waiting_per_replica`` or mean KV usage exceeds ``target_kv_usage``,
    and removes them when both are at or below ``downscale_fraction`` of those
    targets (docs/inference.md, "How engines scale").
    """

    model_config = ConfigDict(extra="forbid")

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(1, ge=1)
    #: Requests waiting in vLLM's scheduler (plus at Serve's handles) per replica
    #: above which a replica is added. Any waiting request means a full batch or a
    #: full KV cache; a few absorb bursts without adding a replica for each.
    target_waiting_per_replica: float = Field(2, ge=0)
    #: Mean KV-cache usage (0-1] above which a replica is added: scales on tokens in
    #: flight before preemption (vLLM recomputes preempted sequences) sets in.
    target_kv_usage: float = Field(0.8, gt=0, le=1)
    #: Scale down only when both signals are at or below this share of their targets.
    downscale_fraction: float = Field(0.5, gt=0, lt=1)
    #: Serve's ongoing requests per replica: used only until replicas report engine stats.
    target_ongoing_requests: float = Field(16, gt=0)
    #: Serve's time hysteresis: a decision must persist this long before Serve acts.
    #: None keeps Serve's default (30 s up, 600 s down).
    upscale_delay_s: float | None = Field(None, ge=0)
    downscale_delay_s: float | None = Field(None, ge=0)
    #: Serve's window over which each replica's stats are averaged (default 30 s).
    look_back_period_s: float | None = Field(None, gt=0)
    #: How often replicas push their stats to the controller (Serve default 10 s;
    #: deprecated by Serve but still what the replica uses; tests set it short).
    metrics_interval_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> Autoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas < min_replicas")
        return self

    def targets(self, max_num_seqs: int) -> EngineTargets:
        """The policy's targets for a pool whose replicas batch ``max_num_seqs``."""
        return EngineTargets(
            waiting_per_replica=self.target_waiting_per_replica,
            kv_usage=self.target_kv_usage,
            downscale_fraction=self.downscale_fraction,
            max_num_seqs=max_num_seqs,
            target_ongoing_requests=self.target_ongoing_requests,
        )

    def serve_config(self, max_num_seqs: int) -> dict[str, Any]:
        """Serve's ``autoscaling_config`` for the engine deployment, with the custom policy."""
        config: dict[str, Any] = {
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "target_ongoing_requests": self.target_ongoing_requests,
        }
        for knob in _SERVE_KNOBS:
            if getattr(self, knob) is not None:
                config[knob] = getattr(self, knob)
        config["policy"] = {
            "policy_function": POLICY_PATH,
            "policy_kwargs": asdict(self.targets(max_num_seqs)),
        }
        return config


_SERVE_KNOBS = ("upscale_delay_s", "downscale_delay_s", "look_back_period_s", "metrics_interval_s")
