"""Admission scopes per inference engine, and the rule that picks an attempt's scope.

The KV cache that limits concurrent work belongs to an **engine** (a Serve
deployment of vLLM replicas), not to a pool: pools ``served_by`` another share
its engine, so they share its one scope and budget. Each scope admits by a
concurrent-token budget (``max_concurrent_tokens``, :func:`engine_scopes_for`)
derived from the engine's KV-cache capacity (``deployments/kv_cache.py``), so
an 8k-token document takes eight times the budget of a 1k-token one, plus the
engine's sequence slots as ``max_in_flight``.

An attempt asks the scope of the engine that will run it: the router sends a
request to the smallest pool whose ``max_model_len`` fits prompt + ``max_tokens``
(``deployments/router.py``), so :func:`route_scope` applies the same rule to the
attempt's estimate (:class:`~cluster.admission.gates.RoutedGate` asks that scope).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from deployments.pools import PoolConfig, PoolsConfig

#: Share of the KV cache admission may reserve; the rest absorbs estimate errors
#: (tokenizer differences, prefix-cache blocks) so vLLM does not preempt.
KV_HEADROOM = 0.9


class EngineScope(BaseModel):
    """One engine's admission scope: its name and ``AdmissionConfig`` fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: str = Field(min_length=1)
    #: ``pipeline.admission.limits.AdmissionConfig`` fields other than ``scope``.
    admission: dict[str, Any] = Field(default_factory=dict)


class PoolRoute(BaseModel):
    """A pool the router may pick, and the scope of the engine that serves it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool: str
    max_model_len: int = Field(gt=0)
    scope: str = Field(min_length=1)


def engine_scope_name(app_name: str, engine: PoolConfig) -> str:
    """``<app>-<engine deployment>``, e.g. ``fenceline-inference-engine-long``."""
    return f"{app_name}-{engine.deployment_name}"


def engine_scopes_for(
    pools: PoolsConfig,
    *,
    headroom: float = KV_HEADROOM,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[list[EngineScope], list[PoolRoute]]:
    """One scope per engine with its token budget, and every pool's route to one.

    Args:
        pools: the pools file.
        headroom: share of the KV cache admission may reserve.
        overrides: other ``AdmissionConfig`` fields for every scope (TTL, weights,
            a tighter ``max_in_flight``); they cannot lift the token budget.

    Raises:
        ValueError: a GPU engine without ``kv_cache_tokens``.
    """
    from deployments.kv_cache import engine_kv_cache_tokens
    from pipeline.admission import AdmissionConfig

    extra = dict(overrides or {})
    extra.pop("max_concurrent_tokens", None)
    scopes: list[EngineScope] = []
    for engine in pools.engine_pools():
        replicas = engine.autoscaling.max_replicas if engine.autoscaling else engine.replicas
        name = engine_scope_name(pools.app_name, engine)
        limits = AdmissionConfig.for_local_pool(
            name,
            engine_kv_cache_tokens(engine),
            headroom=headroom,
            max_num_seqs=engine.max_num_seqs * replicas,
        ).model_dump(include={"max_concurrent_tokens", "max_in_flight"})
        scopes.append(EngineScope(scope=name, admission={**limits, **extra}))
    routes = [
        PoolRoute(
            pool=p.name,
            max_model_len=p.max_model_len,
            scope=engine_scope_name(pools.app_name, pools.serving_pool(p.name)),
        )
        for p in pools.pools
    ]
    return scopes, routes


def route_scope(routes: Sequence[PoolRoute], tokens: int, *, pool: str | None = None) -> str:
    """The scope of the smallest pool whose context fits ``tokens`` (else the largest);
    with ``pool`` (a job's ``model_policy``), that pool's scope, as the router sends the
    call there (a name of no pool: the length rule, and the router refuses the call)."""
    ordered = sorted(routes, key=lambda r: (r.max_model_len, r.pool))
    if not ordered:
        raise ValueError("no pool routes")
    for route in ordered:
        if pool is not None and route.pool == pool:
            return route.scope
    for route in ordered:
        if tokens <= route.max_model_len:
            return route.scope
    return ordered[-1].scope
