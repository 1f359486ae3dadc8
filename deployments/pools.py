"""Engine pools: the one YAML file the Serve app, KubeRay manifests and CLI all read.

A *pool* is a set of identical vLLM replicas sized for one context length. The
router (:mod:`deployments.router`) sends each request to the smallest pool
whose ``max_model_len`` fits prompt + ``max_tokens``, so short invoices never
queue behind 80k-token ones for KV cache (spec section 3, "Local vLLM").

Invariants :class:`PoolsConfig` enforces on load:

* pool names are unique and DNS-safe (they become Serve deployment names and
  Kubernetes labels);
* ``max_num_batched_tokens`` (if set) is at least one full chunk a pool needs;
* a pool asks Ray for the GPUs its tensor parallelism uses
  (``num_gpus == tensor_parallel_size`` on GPU, ``0`` on CPU);
* a pool that says ``served_by: <other>`` has no engine of its own: it names an
  existing pool that has one (not itself ``served_by``), of the same model and
  adapter, whose ``max_model_len`` is at least its own. The router still routes
  by length; the two pools share the other's engine deployment. On a machine
  whose cores cannot feed two engines (the 2-core CPU default) this halves the
  start-up and stops two engines' OpenMP threads starving each other.

``deployments/pools.yaml`` is the local CPU default (two pools of the bundled
SmolLM2 served by one engine); ``deployments/pools.gpu.yaml`` is an H100/H200 profile with an 8B
instruct model. ``FENCELINE_POOLS`` names another file.

A pool's ``lora:`` section (:mod:`deployments.lora`) names the adapter every
request of the pool runs with.

A pool's ``autoscaling:`` section (:mod:`deployments.pool_autoscaling`) replaces its
fixed ``replicas``: Serve scales the engine within its bounds on vLLM's queue depth
and KV-cache usage (:mod:`deployments.engine_autoscaling`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from deployments.lora import LoraAdapter
from deployments.model_prepare import BUNDLED_ALIAS, MODEL_DIR_NAME, default_model_dir
from deployments.ocr_autoscaling import OcrAutoscaling
from deployments.pool_autoscaling import Autoscaling
from pipeline.settings import Settings

DEFAULT_POOLS_PATH = Path(__file__).with_name("pools.yaml")
GPU_POOLS_PATH = Path(__file__).with_name("pools.gpu.yaml")

_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"


class CpuTuning(BaseModel):
    """vLLM CPU-backend settings, exported as environment variables to the engine.

    They are ignored on GPU. Defaults are the fastest measured on the 2-core
    reference machine (docs/inference.md).
    """

    model_config = ConfigDict(extra="forbid")

    #: ``VLLM_CPU_KVCACHE_SPACE`` in GiB: the KV cache on CPU is sized by this, not by
    #: ``gpu_memory_utilization``.
    kvcache_space_gib: int = Field(1, ge=1)
    #: ``VLLM_CPU_OMP_THREADS_BIND``: ``auto`` (one OpenMP thread per physical core,
    #: minus cores vLLM reserves for its scheduler process), ``nobind`` (OpenMP's own
    #: thread count and placement), or explicit cores such as ``0-1``.
    omp_threads_bind: str = "auto"
    #: ``VLLM_CPU_NUM_OF_RESERVED_CPU`` when binding is ``auto``; None keeps vLLM's default.
    reserved_cpus: int | None = Field(None, ge=0)
    #: Allocator to LD_PRELOAD into the engine process: ``auto`` picks tcmalloc if the
    #: machine has it (vLLM recommends it; measured +4 % here), else glibc malloc;
    #: ``none`` forces glibc. vLLM itself preloads torch's libgomp either way.
    allocator: Literal["auto", "tcmalloc", "jemalloc", "none"] = "auto"

    def env(self) -> dict[str, str]:
        env = {
            "VLLM_CPU_KVCACHE_SPACE": str(self.kvcache_space_gib),
            "VLLM_CPU_OMP_THREADS_BIND": self.omp_threads_bind,
        }
        if self.reserved_cpus is not None:
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(self.reserved_cpus)
        return env


StructuredOutputsBackend = Literal["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"]


class StructuredOutputsConfig(BaseModel):
    """vLLM's engine-wide ``structured_outputs_config`` (one per engine, not per request).

    In vLLM 0.32 the xgrammar backend reads ``disable_any_whitespace`` only from
    here; the same flag on a request's ``StructuredOutputsParams`` is ignored, so
    compact JSON has to be an engine setting. Compact answers matter: whitespace
    carries no information, costs decode steps, and is where a small greedy model
    loops until ``max_tokens`` (measured: 0 of 8 SmolLM2 answers finished in 400
    tokens with the grammar allowing whitespace, 8 of 8 at ~190 tokens without).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: StructuredOutputsBackend = "xgrammar"
    #: Compact JSON: the grammar allows no whitespace between tokens (xgrammar, guidance).
    disable_any_whitespace: bool = True


class PoolConfig(BaseModel):
    """One engine pool: vLLM engine arguments plus Ray/Serve placement.

    Attributes mirror ``vllm.AsyncEngineArgs`` where the names match.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME_PATTERN)
    #: A local folder, a hub id (GPU clusters with a model cache), or ``bundled:smollm2``.
    model: str = BUNDLED_ALIAS
    #: The name completions report; defaults to the pool's model.
    served_model_name: str | None = None
    max_model_len: int = Field(gt=0)
    device: Literal["cpu", "gpu"] = "cpu"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    tensor_parallel_size: int = Field(1, ge=1)
    #: GPUs per replica Ray reserves (the tensor-parallel group); 0 on CPU.
    num_gpus: float = Field(0, ge=0)
    #: Ray logical CPUs per replica: 0 or a fraction on small machines (2 cores with
    #: default num_cpus=1 per replica deadlock Serve).
    num_cpus: float = Field(0, ge=0)
    #: Fraction of GPU memory (of host memory on CPU, where KV size comes from cpu.*).
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_num_seqs: int = Field(16, ge=1)
    #: KV-cache tokens of one replica (GPU): the N of vLLM's start-up log line
    #: ``GPU KV cache size: N tokens``. Admission budgets the engine by it
    #: (deployments/kv_cache.py); on CPU it is derived from ``cpu.kvcache_space_gib``.
    kv_cache_tokens: int | None = Field(None, gt=0)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    enable_prefix_caching: bool = True
    #: False compiles (torch.compile / CUDA graphs): the fastest measured; see PoolsConfig.eager.
    enforce_eager: bool = False
    #: A fixed replica count; ignored when ``autoscaling`` is set.
    replicas: int = Field(1, ge=1)
    autoscaling: Autoscaling | None = None
    #: Serve's cap on requests in flight per replica; past it the router's handle queues.
    max_ongoing_requests: int = Field(32, ge=1)
    #: Serve request router class path; None is power-of-two choices.
    request_router_class: str | None = None
    cpu: CpuTuning = Field(default_factory=CpuTuning)
    #: Also serve each replica's ``fenceline_engine_*`` registry over HTTP on this port
    #: (a taken port falls back to a free one, logged). Prometheus needs no port: inside
    #: Ray the replica records them into Ray's metrics agent (deployments/ray_metrics.py);
    #: None: no extra port, the registry is also read by the ``metrics_text`` method.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    #: Extra environment for the replica (e.g. HF_HOME on a cluster).
    env: dict[str, str] = Field(default_factory=dict)
    #: Engine-wide structured-output settings (compact JSON by default).
    structured_outputs_config: StructuredOutputsConfig = Field(
        default_factory=StructuredOutputsConfig
    )
    #: A LoRA adapter applied to every request of the pool; None serves the base model.
    lora: LoraAdapter | None = None
    #: Another pool whose engine serves this pool's requests; None: an engine of its own.
    #: A served pool's engine settings (sizes, tuning, placement) are unused: the
    #: serving pool's apply. See :meth:`PoolsConfig.serving_pool`.
    served_by: str | None = Field(None, pattern=_NAME_PATTERN)

    @model_validator(mode="after")
    def _consistent(self) -> PoolConfig:
        if self.device == "cpu" and self.num_gpus:
            raise ValueError(f"pool {self.name}: num_gpus must be 0 on cpu")
        if self.device == "gpu" and self.num_gpus < self.tensor_parallel_size:
            raise ValueError(
                f"pool {self.name}: num_gpus ({self.num_gpus}) < "
                f"tensor_parallel_size ({self.tensor_parallel_size})"
            )
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < min(
            self.max_model_len, 256
        ):
            raise ValueError(
                f"pool {self.name}: max_num_batched_tokens {self.max_num_batched_tokens} "
                "is too small to schedule a prefill chunk"
            )
        return self

    def resolved_model(self) -> str:
        """The path or hub id vLLM loads; the bundled alias becomes the converted folder."""
        if self.model == BUNDLED_ALIAS:
            return str(default_model_dir())
        return self.model

    def model_name(self) -> str:
        """The name completions report: ``served_model_name``, else the model."""
        if self.served_model_name:
            return self.served_model_name
        return MODEL_DIR_NAME if self.model == BUNDLED_ALIAS else self.model

    def engine_env(self) -> dict[str, str]:
        """Environment the replica sets before vLLM starts its engine process."""
        env = {"HF_HUB_OFFLINE": "1"} if self.model == BUNDLED_ALIAS else {}
        if self.device == "cpu":
            env.update(self.cpu.env())
        env.update(self.env)
        return env

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.AsyncEngineArgs`` (no vLLM import needed here)."""
        kwargs: dict[str, Any] = {
            "model": self.resolved_model(),
            "served_model_name": self.model_name(),
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_seqs": self.max_num_seqs,
            "enable_prefix_caching": self.enable_prefix_caching,
            "enforce_eager": self.enforce_eager,
            # A plain dict here (serve configs, tests); build_engine makes vLLM's object.
            "structured_outputs_config": self.structured_outputs_config.model_dump(),
        }
        if self.lora is not None:
            kwargs.update(enable_lora=True, max_lora_rank=self.lora.max_rank, max_loras=1)
        if self.max_num_batched_tokens is not None:
            kwargs["max_num_batched_tokens"] = self.max_num_batched_tokens
        if self.device == "gpu" and self.tensor_parallel_size > 1:
            # Workers of the TP group run as Ray actors in the replica's placement group.
            kwargs["distributed_executor_backend"] = "ray"
        return kwargs

    @property
    def deployment_name(self) -> str:
        """The Serve deployment of this pool's own engine (when it is not ``served_by``)."""
        return f"engine-{self.name}"

    def deployment_options(self) -> dict[str, Any]:
        """``serve.deployment(...).options(**these)`` for this pool's engine."""
        options: dict[str, Any] = {
            "name": self.deployment_name,
            "max_ongoing_requests": self.max_ongoing_requests,
            # Engine start (weights + KV cache) takes ~40 s on CPU, minutes on GPU.
            "health_check_timeout_s": 60,
            "graceful_shutdown_timeout_s": 30,
        }
        if self.autoscaling is not None:
            options["autoscaling_config"] = self.autoscaling.serve_config(self.max_num_seqs)
        else:
            options["num_replicas"] = self.replicas
        if self.device == "gpu" and self.tensor_parallel_size > 1:
            # Bundle 0 is the replica itself; the others hold one TP worker each,
            # packed on one node so NVLink carries the all-reduce.
            options["placement_group_bundles"] = [{"CPU": max(self.num_cpus, 1), "GPU": 1}] + [
                {"GPU": 1}
            ] * (self.tensor_parallel_size - 1)
            options["placement_group_strategy"] = "STRICT_PACK"
            options["ray_actor_options"] = {"num_cpus": self.num_cpus}
        else:
            options["ray_actor_options"] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.request_router_class is not None:
            options["request_router_config"] = {"request_router_class": self.request_router_class}
        return options


class RouterConfig(BaseModel):
    """The context-length router deployment."""

    model_config = ConfigDict(extra="forbid")

    num_cpus: float = Field(0, ge=0)
    replicas: int = Field(1, ge=1)
    max_ongoing_requests: int = Field(256, ge=1)


#: The custom Ray resource the OCR worker group offers and every OCR replica asks one of.
OCR_RESOURCE = "fenceline-ocr"


class OcrPoolConfig(BaseModel):
    """The OCR pool (``ocr:`` in a pools file): replicas on CPU workers that OCR pages
    (``deployments/ocr_pool.py``), apart from the LLM pools, with an admission scope of
    their own in pages, shared fairly between tenants. Without one, drivers OCR pages
    in process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Replicas at start; with ``autoscaling`` the fleet moves them within its bounds.
    replicas: int = Field(2, ge=1)
    #: Logical CPUs per replica: tesseract reads a page on one core.
    num_cpus: float = Field(1.0, gt=0)
    #: Custom resource each replica asks one of (the OCR worker group's label); None
    #: places replicas on any node with CPUs (one machine, tests).
    resource: str | None = OCR_RESOURCE
    #: Pages OCR'd at once across every driver (the scope's budget); None: one page
    #: per running replica (the budget then follows the autoscaled count).
    max_pages_in_flight: int | None = Field(None, ge=1)
    #: Pages one tenant may hold at once; None: no cap (round robin alone shares the
    #: budget, so a tenant alone may use all of it).
    tenant_max_pages_in_flight: int | None = Field(None, ge=1)
    #: The admission scope's name (one AdmissionActor, apart from the engines').
    scope: str = Field("fenceline-ocr", min_length=1)
    #: A grant not released this long (its driver died mid-page) is expired.
    grant_ttl_seconds: float = Field(600.0, gt=0)
    #: Scale the replicas on the scope's queue (:mod:`deployments.ocr_autoscaling`);
    #: None: ``replicas`` always.
    autoscaling: OcrAutoscaling | None = None

    @model_validator(mode="after")
    def _start_within_bounds(self) -> OcrPoolConfig:
        a = self.autoscaling
        if a is not None and not a.min_replicas <= self.replicas <= a.max_replicas:
            raise ValueError("ocr.replicas must lie within autoscaling's min and max")
        return self

    @property
    def max_replicas(self) -> int:
        """The most replicas the pool ever runs (names ``<prefix>-ocr-0`` .. ``-<n-1>``)."""
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas

    def pages_budget(self, replicas: int | None = None) -> int:
        """Pages in flight the scope grants with ``replicas`` running (default: at start)."""
        return self.max_pages_in_flight or (self.replicas if replicas is None else replicas)

    def admission(self) -> dict[str, Any]:
        """The OCR scope's ``AdmissionConfig`` fields: pages in flight, shared by tenant.

        One grant is one page, so ``max_in_flight`` is the budget in pages and a quantum
        of one "token" (a page's cost) makes the scope's deficit round robin hand out
        one page per waiting tenant per round: a tenant with 500 pages queued holds
        another tenant's first page back by at most one page per other tenant. No token,
        RPM or TPM limit applies (those are the LLM scopes').
        """
        limits: dict[str, Any] = {
            "max_in_flight": self.pages_budget(),
            "grant_ttl_seconds": self.grant_ttl_seconds,
            "quantum_tokens": 1,
        }
        if self.tenant_max_pages_in_flight is not None:
            limits["tenant_max_in_flight"] = self.tenant_max_pages_in_flight
        return limits


class PoolsConfig(BaseModel):
    """The whole pools file: a router and at least one pool, smallest first."""

    model_config = ConfigDict(extra="forbid")

    app_name: str = "fenceline-inference"
    router: RouterConfig = Field(default_factory=RouterConfig)
    pools: list[PoolConfig] = Field(min_length=1)
    #: The OCR pool; None (the default): every driver OCRs pages in its own process.
    ocr: OcrPoolConfig | None = None

    @model_validator(mode="after")
    def _unique_sorted(self) -> PoolsConfig:
        names = [p.name for p in self.pools]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"duplicate pool names: {sorted(duplicates)}")
        # Smallest context first: the router's "smallest pool that fits" is a scan.
        self.pools = sorted(self.pools, key=lambda p: (p.max_model_len, p.name))
        by_name = {p.name: p for p in self.pools}
        for pool in self.pools:
            if pool.served_by is not None:
                _check_serves(pool, by_name.get(pool.served_by))
        return self

    def eager(self) -> PoolsConfig:
        """The same pools without compilation (``enforce_eager``): for short runs.

        torch.compile makes decode a few percent faster but adds ~47 s to every
        engine start, which a batch of a few minutes never earns back.
        """
        return self.model_copy(
            update={"pools": [p.model_copy(update={"enforce_eager": True}) for p in self.pools]}
        )

    def only(self, names: Sequence[str]) -> PoolsConfig:
        """These pools alone (the router routes among them): a run whose documents all
        fit the smallest pool need not start, and share the cores with, a larger one.

        Raises:
            ValueError: a name is unknown, none is given, or a kept pool is
                ``served_by`` a pool left out (keep that one too).
        """
        unknown = sorted(set(names) - {p.name for p in self.pools})
        if unknown or not names:
            raise ValueError(f"unknown or no pools {unknown}; have {[p.name for p in self.pools]}")
        kept = [p for p in self.pools if p.name in names]
        orphans = [p for p in kept if p.served_by is not None and p.served_by not in names]
        if orphans:
            raise ValueError(
                ", ".join(f"pool {p.name} is served_by {p.served_by}" for p in orphans)
                + ": keep the serving pool too"
            )
        return self.model_copy(update={"pools": kept})

    def pool(self, name: str) -> PoolConfig:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(name)

    def serving_pool(self, name: str) -> PoolConfig:
        """The pool whose engine serves pool ``name``: its ``served_by``, else itself."""
        pool = self.pool(name)
        return pool if pool.served_by is None else self.pool(pool.served_by)

    def engine_pools(self) -> list[PoolConfig]:
        """The pools with an engine deployment of their own (smallest context first)."""
        return [p for p in self.pools if p.served_by is None]

    def engine_deployment(self, name: str) -> str:
        """The Serve deployment that runs pool ``name``'s requests."""
        return self.serving_pool(name).deployment_name

    def engine_deployments(self) -> list[str]:
        """Every engine deployment of the app, once each (smallest context first)."""
        return [p.deployment_name for p in self.engine_pools()]

    @property
    def largest_context(self) -> int:
        return max(p.max_model_len for p in self.pools)


def _check_serves(pool: PoolConfig, server: PoolConfig | None) -> None:
    """Raise ValueError unless ``server`` can run every request routed to ``pool``."""
    where = f"pool {pool.name}: served_by {pool.served_by!r}"
    if server is None:
        raise ValueError(f"{where} names no pool of this file")
    if server.name == pool.name:
        raise ValueError(f"{where} names the pool itself; leave served_by out instead")
    if server.served_by is not None:
        raise ValueError(f"{where} is itself served_by {server.served_by!r}; name that one")
    if server.model != pool.model or server.lora != pool.lora:
        # The router counts tokens with the pool's model; the engine runs its own
        # model and adapter: they must be the same or counts and answers disagree.
        raise ValueError(f"{where} serves another model or adapter")
    if server.max_model_len < pool.max_model_len:
        raise ValueError(f"{where} has max_model_len {server.max_model_len} < {pool.max_model_len}")


def pools_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The pools file to use: ``path``, else ``$FENCELINE_POOLS``, else the CPU default."""
    if path is not None:
        return Path(path)
    configured = Settings().pools
    return configured if configured is not None else DEFAULT_POOLS_PATH


def load_pools(path: str | os.PathLike[str] | None = None) -> PoolsConfig:
    """Read and validate a pools file (see :func:`pools_path` for the default)."""
    with pools_path(path).open() as f:
        raw = yaml.safe_load(f)
    return parse_pools(raw)


def parse_pools(raw: Mapping[str, Any]) -> PoolsConfig:
    """Validate an already-parsed pools document; pool defaults merge into each pool.

    A top-level ``defaults:`` mapping is applied under every pool's own keys, so
    the file states shared engine settings once.
    """
    data = dict(raw)
    defaults = data.pop("defaults", None) or {}
    pools = [_merge(defaults, p) for p in data.get("pools") or []]
    data["pools"] = pools
    return PoolsConfig.model_validate(data)


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
