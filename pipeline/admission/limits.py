"""The limits of an admission scope, and the capacity they imply (spec section 3).

:class:`AdmissionConfig` is the validated configuration of one scope — a
provider project or a local engine pool — that :class:`pipeline.admission.policy.AdmissionPolicy`
enforces and ``cluster.admission.AdmissionActor`` is built from. The capacity
functions turn the same limits into planning numbers: the spec's worked example
(RPM 600, TPM 600,000, 6,000 reserved tokens, 30 concurrent calls of 15 s mean,
1.10 attempts per job) gives 1.6667 attempts/s, 1.5152 jobs/s, 6,600 s to drain
10,000 jobs, and ~19,412 s with 1 job/s still arriving. They are steady-state
approximations: bursts, token-length spread and latency tails change real
completion times, and cost must come from reported usage, not reservations.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.admission.grants import PriorityClass

#: Length of the RPM/TPM sliding window, as providers define the limits.
WINDOW_SECONDS = 60.0
#: Length of the TPD window (a provider's daily token limit), sliding as well.
DAY_SECONDS = 86_400.0

_DEFAULT_CLASS_WEIGHTS = {
    PriorityClass.INTERACTIVE: 4.0,
    PriorityClass.STANDARD: 1.0,
    PriorityClass.BATCH: 0.25,
}


class AdmissionConfig(BaseModel):
    """Limits of one scope. A limit left ``None`` is not enforced.

    Attributes:
        scope: the provider project or engine pool the limits belong to.
        rpm: request slots per sliding 60 s window.
        tpm: charged tokens per sliding 60 s window.
        tpd: charged tokens per sliding day (``day_seconds``), a provider's daily
            token limit; a restarted actor replays the day from the ledger.
        max_in_flight: concurrent grants in the scope.
        max_concurrent_tokens: reserved tokens of concurrent grants (local pools:
            KV-cache headroom; see :meth:`for_local_pool`).
        tenant_max_in_flight: default per-tenant concurrent grants.
        tenant_in_flight: per-tenant overrides of that limit.
        tenant_weights: fair-share weight per tenant (default 1).
        class_weights: fair-share weight per priority class.
        quantum_tokens: tokens added to a flow's deficit per round (× weights).
        count_cached_tokens: whether cached prompt tokens count against TPM
            (provider rule; e.g. False where cache reads are exempt).
        cooldown_default_seconds: cooldown after a 429 without a valid hint;
            doubles per consecutive 429 until a call reports usage.
        cooldown_min_seconds, cooldown_max_seconds: clamp for delay hints.
        grant_ttl_seconds: a grant unreleased this long is expired (uncertain).
            Must exceed the attempt timeout plus a margin.
        recheck_seconds: wait hint when only a release can unblock a request.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str = Field(min_length=1)
    rpm: int | None = Field(None, gt=0)
    tpm: int | None = Field(None, gt=0)
    tpd: int | None = Field(None, gt=0)
    max_in_flight: int | None = Field(None, gt=0)
    max_concurrent_tokens: int | None = Field(None, gt=0)
    tenant_max_in_flight: int | None = Field(None, gt=0)
    tenant_in_flight: dict[str, int] = Field(default_factory=dict)
    tenant_weights: dict[str, float] = Field(default_factory=dict)
    class_weights: dict[PriorityClass, float] = Field(
        default_factory=lambda: dict(_DEFAULT_CLASS_WEIGHTS)
    )
    quantum_tokens: int = Field(4096, gt=0)
    count_cached_tokens: bool = True
    cooldown_default_seconds: float = Field(5.0, gt=0)
    cooldown_min_seconds: float = Field(0.5, ge=0)
    cooldown_max_seconds: float = Field(300.0, gt=0)
    grant_ttl_seconds: float | None = Field(120.0, gt=0)
    window_seconds: float = Field(WINDOW_SECONDS, gt=0)
    day_seconds: float = Field(DAY_SECONDS, gt=0)
    recheck_seconds: float = Field(1.0, gt=0)

    @field_validator("tenant_in_flight")
    @classmethod
    def _positive_limits(cls, v: dict[str, int]) -> dict[str, int]:
        if any(n <= 0 for n in v.values()):
            raise ValueError("tenant in-flight limits must be positive")
        return v

    @field_validator("tenant_weights", "class_weights")
    @classmethod
    def _positive_weights(cls, v: dict[Any, float]) -> dict[Any, float]:
        if any(not (w > 0 and math.isfinite(w)) for w in v.values()):
            raise ValueError("weights must be positive and finite")
        return v

    @classmethod
    def for_local_pool(
        cls,
        scope: str,
        kv_cache_tokens: int,
        *,
        headroom: float = 0.9,
        max_num_seqs: int | None = None,
        **limits: Any,
    ) -> AdmissionConfig:
        """Limits of a local vLLM pool: a budget of concurrent tokens, not requests.

        Args:
            scope: the pool name.
            kv_cache_tokens: KV-cache capacity of the pool in tokens
                (:func:`kv_cache_tokens`, summed over replicas).
            headroom: fraction of the cache admission may reserve; the rest
                absorbs estimate errors so vLLM does not preempt.
            max_num_seqs: the engines' sequence limit, as an in-flight cap.
            **limits: any other :class:`AdmissionConfig` field.
        """
        if not 0 < headroom <= 1:
            raise ValueError("headroom must be in (0, 1]")
        return cls(
            scope=scope,
            max_concurrent_tokens=max(1, int(kv_cache_tokens * headroom)),
            max_in_flight=max_num_seqs,
            **limits,
        )

    def replay_seconds(self) -> float:
        """How far back a restarted actor replays the ledger: the day when TPD is set."""
        return max(self.window_seconds, self.day_seconds if self.tpd is not None else 0.0)

    def tenant_limit(self, tenant: str) -> int | None:
        return self.tenant_in_flight.get(tenant, self.tenant_max_in_flight)

    def quantum(self, tenant: str, priority: PriorityClass) -> float:
        weight = self.tenant_weights.get(tenant, 1.0)
        return self.quantum_tokens * weight * self.class_weights.get(priority, 1.0)


# ---- capacity planning ---------------------------------------------------------


def attempt_capacity(
    *,
    rpm: float,
    tpm: float,
    reserved_tokens: float,
    concurrency: float,
    mean_service_seconds: float,
) -> float:
    """Attempts/s a scope sustains: the tightest of RPM, TPM and Little's-law concurrency.

    ``min(RPM/60, TPM/(60·reserved_tokens), concurrency/mean_service_seconds)``.
    """
    return min(rpm / 60.0, tpm / (60.0 * reserved_tokens), concurrency / mean_service_seconds)


def job_capacity(attempt_capacity: float, mean_attempts_per_job: float) -> float:
    """Jobs/s: retries consume attempts, so capacity divides by attempts per job."""
    return attempt_capacity / mean_attempts_per_job


def drain_seconds(backlog_jobs: float, job_capacity: float, arrival_rate: float = 0.0) -> float:
    """Time to drain a backlog at ``job_capacity`` with ongoing arrivals; inf if never."""
    net = job_capacity - arrival_rate
    return backlog_jobs / net if net > 0 else math.inf


def littles_law_concurrency(arrival_rate: float, mean_service_seconds: float) -> float:
    """Mean in-flight work of a stable system, L = λ·E[S] (use the mean, not p95)."""
    return arrival_rate * mean_service_seconds


def kv_cache_tokens(num_blocks: int, block_size: int, replicas: int = 1) -> int:
    """Tokens the KV cache of a pool holds (vLLM reports blocks × block size)."""
    return num_blocks * block_size * replicas
