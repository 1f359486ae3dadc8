"""Token budgets per engine scope: derived from KV-cache capacity, shared by served_by pools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.admission import (
    ActorGate,
    AdmissionActor,
    AdmissionClient,
    LocalActorHandle,
    PoolRoute,
    RoutedGate,
    engine_scopes_for,
    route_scope,
)
from cluster.drivers import EngineSpec
from cluster.runtime import ClusterConfig
from cluster.runtime_config import RuntimeConfig, runtime_config_for
from deployments.kv_cache import (
    BUNDLED_MODEL_GEOMETRY,
    FALLBACK_KV_BYTES_PER_TOKEN,
    GIB,
    engine_kv_cache_tokens,
    kv_bytes_per_token,
    model_kv_bytes_per_token,
)
from deployments.pools import GPU_POOLS_PATH, load_pools, parse_pools
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CPU_POOLS = ROOT / "deployments/pools.yaml"
#: SmolLM2-135M in float32: 30 layers x 3 KV heads x 64 x 2 (K, V) x 4 B.
SMOLLM2_F32 = 30 * 3 * 64 * 2 * 4


def test_kv_bytes_per_token_follows_the_model_geometry() -> None:
    assert kv_bytes_per_token(BUNDLED_MODEL_GEOMETRY, 4) == SMOLLM2_F32 == 46_080
    llama_8b = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "hidden_size": 4096}  # fmt: skip
    assert kv_bytes_per_token(llama_8b, 2) == 128 * 1024  # head_dim = 4096 / 32
    # No grouped-query attention: every attention head has its own K and V.
    assert kv_bytes_per_token({"num_hidden_layers": 2, "num_attention_heads": 4,
                               "hidden_size": 256}, 2) == 2 * 4 * 64 * 2 * 2  # fmt: skip


def test_cpu_budget_from_the_prepared_models_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A prepared model whose config says twice the KV heads halves the cache's tokens.
    (tmp_path / "config.json").write_text(
        json.dumps({**BUNDLED_MODEL_GEOMETRY, "num_key_value_heads": 6})
    )
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path))
    engine = load_pools(CPU_POOLS).pool("long")
    assert model_kv_bytes_per_token(engine) == 2 * SMOLLM2_F32
    assert engine_kv_cache_tokens(engine) == GIB // (2 * SMOLLM2_F32) == 11_650


def test_cpu_budget_without_the_model_uses_the_bundled_geometry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path / "not-prepared"))
    pools = load_pools(CPU_POOLS)
    assert model_kv_bytes_per_token(pools.pool("long")) == SMOLLM2_F32
    # Another model without a readable config: the documented conservative size.
    other = pools.pool("long").model_copy(update={"model": str(tmp_path / "elsewhere")})
    assert model_kv_bytes_per_token(other) == FALLBACK_KV_BYTES_PER_TOKEN > SMOLLM2_F32


def test_shipped_cpu_pools_share_one_engine_scope_budgeted_by_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path))  # same numbers on any machine
    runtime = runtime_config_for(load_pools(CPU_POOLS))
    [scope] = runtime.engine_scopes
    assert scope.scope == "fenceline-inference-engine-long"
    # 1 GiB / 46,080 B = 23,301 tokens (< 16 seqs x 8,192), 90 % of it reservable.
    assert scope.admission == {"max_concurrent_tokens": int(23_301 * 0.9), "max_in_flight": 16}
    assert {(r.pool, r.scope) for r in runtime.pool_routes} == {
        ("short", scope.scope),
        ("long", scope.scope),
    }
    assert runtime.admission_scopes() == {scope.scope: scope.admission}
    # The actor accepts it, and an 8k-context attempt fits the budget.
    config = AdmissionConfig(scope=scope.scope, **scope.admission)
    assert config.max_concurrent_tokens is not None and config.max_concurrent_tokens >= 8192


def test_shipped_gpu_pools_get_one_scope_per_engine() -> None:
    pools = load_pools(GPU_POOLS_PATH)
    runtime = runtime_config_for(pools)
    budgets = {s.scope: s.admission for s in runtime.engine_scopes}
    assert budgets == {
        # kv_cache_tokens per replica x max_replicas, 90 % reservable.
        "fenceline-inference-engine-short": {
            "max_concurrent_tokens": int(400_000 * 4 * 0.9),
            "max_in_flight": 128 * 4,
        },
        "fenceline-inference-engine-long": {
            "max_concurrent_tokens": int(900_000 * 2 * 0.9),
            "max_in_flight": 16 * 2,
        },
    }
    assert {r.pool: r.scope for r in runtime.pool_routes} == {
        "short": "fenceline-inference-engine-short",
        "long": "fenceline-inference-engine-long",
    }


def _gpu_pools(**long: object) -> dict[str, object]:
    return {
        "defaults": {"model": "m", "device": "gpu", "num_gpus": 1},
        "pools": [
            {"name": "short", "max_model_len": 8192, "kv_cache_tokens": 100_000},
            {"name": "mid", "max_model_len": 16384, "served_by": "long"},
            {"name": "long", "max_model_len": 32768, "max_num_seqs": 2, **long},
        ],
    }


def test_gpu_budget_is_capped_by_sequences_and_needs_the_logged_cache_size() -> None:
    pools = parse_pools(_gpu_pools(kv_cache_tokens=10_000_000))
    scopes, routes = engine_scopes_for(pools, headroom=1.0)
    # 2 sequences x 32,768 tokens is all the long engine can ever hold at once.
    assert {s.scope: s.admission["max_concurrent_tokens"] for s in scopes} == {
        "fenceline-inference-engine-short": 100_000,
        "fenceline-inference-engine-long": 65_536,
    }
    # The served_by pool asks its server's scope.
    assert {r.pool: r.scope for r in routes}["mid"] == "fenceline-inference-engine-long"
    with pytest.raises(ValueError, match="GPU KV cache size"):
        engine_scopes_for(parse_pools(_gpu_pools()))


def test_overrides_cannot_lift_the_token_budget() -> None:
    pools = parse_pools(_gpu_pools(kv_cache_tokens=50_000))
    scopes, _ = engine_scopes_for(
        pools, overrides={"max_concurrent_tokens": 10**9, "max_in_flight": 3}
    )
    assert [s.admission for s in scopes] == [
        {"max_concurrent_tokens": 90_000, "max_in_flight": 3},
        {"max_concurrent_tokens": 45_000, "max_in_flight": 3},
    ]


def test_fenceline_up_and_demo_admit_per_engine_by_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path))
    cluster = ClusterConfig(
        settings=Settings(),
        pools_file=CPU_POOLS,
        admission={"max_in_flight": 8, "grant_ttl_seconds": 900.0},  # as the demo passes
    )
    runtime = cluster.runtime()
    assert runtime.admission_scopes() == {
        "fenceline-inference-engine-long": {
            "max_concurrent_tokens": 20_970,
            "max_in_flight": 8,
            "grant_ttl_seconds": 900.0,
        }
    }
    # A hosted provider has no engine scopes: its one scope and limits as given.
    hosted = ClusterConfig(
        settings=Settings(),
        engine=EngineSpec(kind="openai", base_url="http://127.0.0.1:9"),
        admission={"rpm": 600},
    ).runtime()
    assert hosted.admission_scopes() == {"fenceline-inference": {"rpm": 600}}


def test_routes_must_name_a_scope() -> None:
    with pytest.raises(ValueError, match="agree"):
        RuntimeConfig(pool_routes=[PoolRoute(pool="a", max_model_len=10, scope="x")])


# ---- the gate an attempt goes through ------------------------------------------------

ROUTES = [
    PoolRoute(pool="short", max_model_len=8192, scope="eng-short"),
    PoolRoute(pool="mid", max_model_len=16384, scope="eng-long"),
    PoolRoute(pool="long", max_model_len=32768, scope="eng-long"),
]


def test_route_scope_is_the_routers_smallest_fitting_pool() -> None:
    assert route_scope(ROUTES, 8192) == "eng-short"
    assert route_scope(ROUTES, 8193) == "eng-long"
    assert route_scope(ROUTES, 10**6) == "eng-long"  # too long anywhere: the largest


async def test_routed_gate_asks_and_releases_the_engines_scope() -> None:
    actors = {
        scope: AdmissionActor(AdmissionConfig(scope=scope, max_concurrent_tokens=20_000))
        for scope in ("eng-short", "eng-long")
    }
    gates = {
        scope: ActorGate(AdmissionClient(LocalActorHandle(actor), scope=scope))
        for scope, actor in actors.items()
    }
    gate = RoutedGate(gates, ROUTES)
    short = await gate.acquire(AdmissionRequest("t", 2000, 1000), timeout=0.0)
    long = await gate.acquire(AdmissionRequest("t", 12_000, 2000), timeout=0.0)
    assert isinstance(short, Grant) and isinstance(long, Grant)
    assert (short.scope, long.scope) == ("eng-short", "eng-long")
    snaps = {s: await a.snapshot() for s, a in actors.items()}
    assert {s: snap["in_flight"] for s, snap in snaps.items()} == {"eng-short": 1, "eng-long": 1}
    await gate.release(long, usage=None, uncertain=False)
    assert (await actors["eng-long"].snapshot())["in_flight"] == 0
    assert (await actors["eng-short"].snapshot())["in_flight"] == 1
    with pytest.raises(ValueError, match="without a gate"):
        RoutedGate({"eng-short": gates["eng-short"]}, ROUTES)
    for actor in actors.values():
        await actor.stop()


def test_supervisor_runs_one_admission_actor_per_engine_scope() -> None:
    from cluster.supervisor import EnvironmentSettings, RuntimeSupervisor

    def members(runtime: RuntimeConfig) -> list[str]:
        supervisor = object.__new__(RuntimeSupervisor)  # the plan only; no Ray needed
        supervisor.config, supervisor.settings = runtime, EnvironmentSettings()
        return [m.name for m in supervisor._plan() if m.name.startswith("admission")]

    assert members(runtime_config_for(load_pools(GPU_POOLS_PATH))) == [
        "admission-fenceline-inference-engine-short",
        "admission-fenceline-inference-engine-long",
        "admission-fenceline-ocr",  # the OCR pool's scope of pages, apart from the engines'
    ]
    # One engine (the CPU default): the one actor keeps its plain name.
    assert members(runtime_config_for(load_pools(CPU_POOLS))) == ["admission"]


def test_the_supervisor_runs_the_ocr_pool_the_pools_file_declares() -> None:
    from cluster.supervisor import EnvironmentSettings, RuntimeSupervisor

    def names(runtime: RuntimeConfig) -> list[str]:
        supervisor = object.__new__(RuntimeSupervisor)  # the plan only; no Ray needed
        supervisor.config, supervisor.settings = runtime, EnvironmentSettings()
        return [m.name for m in supervisor._plan() if "ocr" in m.name]

    gpu = runtime_config_for(load_pools(GPU_POOLS_PATH))
    assert gpu.ocr is not None and gpu.ocr.replicas == 4
    assert names(gpu) == ["admission-fenceline-ocr"] + [f"fenceline-ocr-{i}" for i in range(4)]
    scope = gpu.ocr_scope()
    # One page a grant, one page per tenant per round (quantum 1): fair by tenant.
    assert scope == (
        "fenceline-ocr",
        {"max_in_flight": 4, "grant_ttl_seconds": 600.0, "quantum_tokens": 1},
    )
    assert "fenceline-ocr" not in gpu.admission_scopes()  # pages, never an LLM scope
    assert names(runtime_config_for(load_pools(CPU_POOLS))) == []  # OCR in process
