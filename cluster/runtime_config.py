"""What the job runtime is told to run, and how it is sized from the pools file.

:class:`RuntimeConfig` is the ``args`` of the ``fenceline-runtime`` Serve
application (:mod:`cluster.supervisor` runs it); :func:`runtime_config_for`
derives it from the pools, so ``kuberay/generate.py``, ``fenceline up`` and the
supervisor agree on drivers, leases and admission scopes without starting Ray.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cluster.admission import EngineScope, PoolRoute, engine_scopes_for
from deployments.pools import OcrPoolConfig

if TYPE_CHECKING:
    from deployments.pools import PoolsConfig
    from pipeline.settings import Settings

#: Leases a driver holds at most; beyond it add drivers (they spread over nodes).
MAX_DRIVER_CONCURRENCY = 64


class RuntimeConfig(BaseModel):
    """``args`` of the runtime application (everything else comes from ``FENCELINE_*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The Serve application drivers call (the inference app of the pools file).
    engine_app: str = "fenceline-inference"
    drivers: int = Field(2, ge=1)
    #: Leases per driver (its semaphore); drivers × concurrency ≈ engine slots.
    concurrency: int = Field(4, ge=1, le=MAX_DRIVER_CONCURRENCY)
    #: Admission scope; None uses ``engine_app``.
    admission_scope: str | None = None
    #: ``pipeline.admission.limits.AdmissionConfig`` fields other than ``scope``
    #: (the one scope used when ``engine_scopes`` is empty, e.g. a hosted provider).
    admission: dict[str, Any] = Field(default_factory=dict)
    #: One admission scope per inference engine, each with its token budget
    #: (:func:`cluster.admission.engine_scopes_for`); empty: the one scope above.
    engine_scopes: list[EngineScope] = Field(default_factory=list)
    #: Every pool's context length and its engine's scope: an attempt asks the scope
    #: of the pool the router will pick (:class:`cluster.admission.RoutedGate`).
    pool_routes: list[PoolRoute] = Field(default_factory=list)
    #: Prefix of the actor names (``<prefix>-driver-0`` ...).
    actor_prefix: str = Field("fenceline", pattern=r"^[a-z][a-z0-9-]*$")
    #: What drivers call: ``serve`` (``engine_app``) or an OpenAI-compatible ``openai``
    #: provider at ``provider_url`` (its key, if any, from ``Settings.provider_api_key``,
    #: i.e. ``FENCELINE_PROVIDER_API_KEY``). An empty ``provider_url`` (and a
    #: ``provider_model`` left at ``default``) are read from ``FENCELINE_PROVIDER_URL``
    #: (``_MODEL``) by the supervisor: :meth:`provider`.
    engine: Literal["serve", "openai"] = "serve"
    provider_url: str = ""
    provider_model: str = "default"
    #: ``pipeline.worker.attempt.WorkerConfig`` fields for every driver (timeouts, output cap);
    #: unset ones come from the settings (attempt timeout, heartbeat) or the defaults.
    worker: dict[str, Any] = Field(default_factory=dict)
    #: The Ray OCR pool (``deployments/ocr_pool.py``): replicas on the OCR worker group and
    #: their own admission scope in pages; None: drivers OCR pages in process.
    ocr: OcrPoolConfig | None = None
    #: Longest a health check waits for one actor before it is replaced.
    ping_timeout_s: float = Field(20.0, gt=0)
    #: Grace a stopping driver gets to finish or release its leases.
    stop_grace_s: float = Field(20.0, ge=0)

    @property
    def scope(self) -> str:
        return self.admission_scope or self.engine_app

    @model_validator(mode="after")
    def _engine_and_worker(self) -> RuntimeConfig:
        from pipeline.worker import WorkerConfig

        known = {f.name for f in fields(WorkerConfig)} - {"worker_id", "concurrency", "claim_batch"}
        unknown = sorted(set(self.worker) - known)
        if unknown:
            raise ValueError(f"unknown worker fields {unknown}; known: {sorted(known)}")
        scopes = {s.scope for s in self.engine_scopes}
        if bool(scopes) != bool(self.pool_routes) or {r.scope for r in self.pool_routes} - scopes:
            raise ValueError("engine_scopes and pool_routes must come together and agree")
        return self

    def admission_scopes(self, settings: Settings | None = None) -> dict[str, dict[str, Any]]:
        """``{scope: AdmissionConfig fields}`` of every admission actor to run.

        With a hosted provider (``engine`` ``openai``) the one scope is the provider
        project's: its budgets come from ``settings`` (``FENCELINE_PROVIDER_RPM``,
        ``_TPM``, ``_TPD``, ``_CONCURRENCY``), and ``admission`` overrides them.
        """
        if self.engine_scopes:
            return {s.scope: s.admission for s in self.engine_scopes}
        if self.engine == "openai" and settings is not None:
            return {self.scope: {**settings.provider_limits(), **self.admission}}
        return {self.scope: self.admission}

    def provider(self, settings: Settings) -> tuple[str, str]:
        """The provider's base URL and model: these args, else the settings'.

        Raises:
            ValueError: the ``openai`` engine with no URL in the args or the settings.
        """
        if self.engine != "openai":
            return self.provider_url, self.provider_model
        url = self.provider_url or settings.provider_url or ""
        if not url:
            raise ValueError("engine openai needs provider_url or FENCELINE_PROVIDER_URL")
        model = self.provider_model
        if model == "default" and settings.provider_model:
            model = settings.provider_model
        return url, model

    def ocr_scope(self) -> tuple[str, dict[str, Any]] | None:
        """The OCR pool's admission scope and its limits (pages), apart from
        :meth:`admission_scopes` (tokens); None without an OCR pool."""
        if self.ocr is None:
            return None
        if self.ocr.scope in self.admission_scopes():
            raise ValueError(f"the OCR scope {self.ocr.scope!r} is an LLM scope's name")
        return self.ocr.scope, self.ocr.admission()


def runtime_config_for(pools: PoolsConfig) -> RuntimeConfig:
    """Size the drivers from the pools: enough leases in flight to fill every engine slot.

    Engine slots = Σ over engines of ``max_num_seqs`` × (max) replicas (a pool
    ``served_by`` another adds no slots: it shares that engine's). Fewer leases
    than slots leave batch capacity idle; many more only queue inside Serve while
    their leases run down (Little's law: in flight = throughput × service time, and
    the engines bound the throughput). At least two drivers, so a killed driver
    never stops the runtime.

    Admission is per engine: each engine's scope admits by a concurrent-token
    budget from its KV-cache capacity (and its slots as ``max_in_flight``), and
    pools ``served_by`` it share that scope (:func:`engine_scopes_for`).
    """
    scopes, routes = engine_scopes_for(pools)
    slots = 0
    for pool in pools.engine_pools():
        replicas = pool.autoscaling.max_replicas if pool.autoscaling else pool.replicas
        slots += pool.max_num_seqs * replicas
    drivers = max(2, math.ceil(slots / MAX_DRIVER_CONCURRENCY))
    return RuntimeConfig(
        engine_app=pools.app_name,
        drivers=drivers,
        concurrency=max(1, math.ceil(slots / drivers)),
        engine_scopes=scopes,
        pool_routes=routes,
        ocr=pools.ocr,
    )
