"""The pools file, context-length pool choice, Serve options and config, and the bundled model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from deployments import model_prepare
from deployments.app import IMPORT_PATH, serve_config, write_serve_config
from deployments.lora import PROJECT_ROOT, LoraAdapter
from deployments.pools import (
    DEFAULT_POOLS_PATH,
    GPU_POOLS_PATH,
    PoolConfig,
    load_pools,
    parse_pools,
)
from deployments.router import choose_pool
from pipeline.errors import ContextTooLong, TerminalError

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def two_pools(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "defaults": {"model": "/models/m", "cpu": {"kvcache_space_gib": 2}},
        "pools": [
            {"name": "long", "max_model_len": 8192, "cpu": {"omp_threads_bind": "0-1"}},
            {"name": "short", "max_model_len": 2048},
        ],
    }
    doc.update(overrides)
    return doc


def test_default_cpu_file_has_short_and_long_pools_of_the_bundled_model_on_one_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path / "smol"))
    config = load_pools(DEFAULT_POOLS_PATH)
    assert [p.name for p in config.pools] == ["short", "long"]
    short, long = config.pools
    assert short.max_model_len < long.max_model_len
    # Two cores cannot feed two engines: the long pool's engine serves both.
    assert short.served_by == "long" and long.served_by is None
    assert config.engine_pools() == [long]
    assert config.engine_deployments() == ["engine-long"]
    assert config.engine_deployment("short") == config.engine_deployment("long") == "engine-long"
    # Sized for both pools' traffic (short's 16 sequences), with the adapter kept.
    assert long.max_num_seqs >= 16 and long.lora is not None and long.lora == short.lora
    for pool in config.pools:
        assert pool.device == "cpu"
        assert pool.dtype == "float32"  # bf16 is ~3x slower on this AVX2 CPU
        assert pool.resolved_model() == str(tmp_path / "smol")
        options = pool.deployment_options()
        assert options["ray_actor_options"] == {"num_cpus": 0, "num_gpus": 0}
        assert options["name"] == pool.deployment_name == f"engine-{pool.name}"
        env = pool.engine_env()
        assert env["HF_HUB_OFFLINE"] == "1"
        assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
        assert "VLLM_CPU_OMP_THREADS_BIND" in env
    assert config.router.num_cpus == 0


def test_gpu_profile_sizes_pools_differently():
    config = load_pools(GPU_POOLS_PATH)
    short, long = config.pools
    # GPU pools keep an engine deployment each.
    assert config.engine_pools() == [short, long]
    assert config.engine_deployments() == ["engine-short", "engine-long"]
    assert short.device == long.device == "gpu"
    assert short.max_model_len < long.max_model_len
    assert short.max_num_seqs > long.max_num_seqs
    assert short.engine_env() == {"HF_HUB_OFFLINE": "1"}  # no CPU variables on GPU
    assert short.deployment_options()["ray_actor_options"]["num_gpus"] == 1
    assert "distributed_executor_backend" not in short.engine_kwargs()
    options = long.deployment_options()
    assert options["placement_group_strategy"] == "STRICT_PACK"
    assert len(options["placement_group_bundles"]) == long.tensor_parallel_size == 2
    assert sum(b.get("GPU", 0) for b in options["placement_group_bundles"]) == 2
    assert long.engine_kwargs()["distributed_executor_backend"] == "ray"
    assert "autoscaling_config" in options and "num_replicas" not in options


def test_defaults_merge_deeply_and_pools_sort_by_context():
    config = parse_pools(two_pools())
    assert [p.name for p in config.pools] == ["short", "long"]
    long = config.pool("long")
    assert long.cpu.kvcache_space_gib == 2  # from defaults
    assert long.cpu.omp_threads_bind == "0-1"  # its own
    assert config.pool("short").cpu.omp_threads_bind == "auto"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (two_pools(pools=[]), "at least 1"),
        (
            two_pools(pools=[{"name": "a", "max_model_len": 1}, {"name": "a", "max_model_len": 2}]),
            "duplicate",
        ),
        (two_pools(pools=[{"name": "Bad_Name", "max_model_len": 10}]), "pattern"),
        (two_pools(pools=[{"name": "a", "max_model_len": 10, "max_len": 5}]), "extra"),
        (
            two_pools(pools=[{"name": "a", "max_model_len": 10, "device": "cpu", "num_gpus": 1}]),
            "num_gpus must be 0",
        ),
        (
            two_pools(
                pools=[
                    {"name": "a", "max_model_len": 10, "device": "gpu", "num_gpus": 1},
                ],
                defaults={"tensor_parallel_size": 2},
            ),
            "tensor_parallel_size",
        ),
    ],
)
def test_invalid_files_are_rejected(doc: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match=message):
        parse_pools(doc)


def served(**short: Any) -> dict[str, Any]:
    """two_pools() with ``short`` served_by ``long`` (plus overrides of short)."""
    return two_pools(
        pools=[
            {"name": "long", "max_model_len": 8192},
            {"name": "short", "max_model_len": 2048, "served_by": "long", **short},
        ]
    )


def test_a_served_pool_routes_by_its_own_length_and_runs_on_the_serving_engine():
    config = parse_pools(served())
    assert [p.name for p in config.pools] == ["short", "long"]
    assert config.serving_pool("short").name == config.serving_pool("long").name == "long"
    assert config.engine_deployment("short") == "engine-long"
    assert config.engine_deployments() == ["engine-long"]
    # The router still picks the smallest pool that fits.
    assert choose_pool(config, {"short": 1000, "long": 1000}, max_tokens=1048) == "short"
    assert choose_pool(config, {"short": 1000, "long": 1000}, max_tokens=1049) == "long"
    with pytest.raises(KeyError):
        config.serving_pool("medium")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (served(served_by="medium"), "served_by 'medium' names no pool"),
        (served(served_by="short"), "names the pool itself"),
        (
            two_pools(
                pools=[
                    {"name": "a", "max_model_len": 10, "served_by": "b"},
                    {"name": "b", "max_model_len": 20, "served_by": "c"},
                    {"name": "c", "max_model_len": 30},
                ]
            ),
            "pool a: served_by 'b' is itself served_by 'c'",
        ),
        (served(model="/models/other"), "another model or adapter"),
        (served(lora={"name": "x", "path": "adapters/x"}), "another model or adapter"),
        (served(max_model_len=16384), "max_model_len 8192 < 16384"),
        (served(served_by="Bad_Name"), "pattern"),
    ],
)
def test_served_by_must_name_an_engine_that_can_run_the_pool(doc: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match=message):
        parse_pools(doc)


def test_a_subset_keeps_a_served_pool_only_with_its_server():
    config = parse_pools(served())
    assert config.only(["short", "long"]).engine_deployments() == ["engine-long"]
    assert config.only(["long"]).engine_deployments() == ["engine-long"]
    with pytest.raises(ValueError, match="pool short is served_by long: keep the serving pool"):
        config.only(["short"])


def test_the_app_makes_one_engine_per_serving_pool_and_shares_it():
    from deployments.app import pool_engines

    config = parse_pools(
        two_pools(
            pools=[
                {"name": "tiny", "max_model_len": 1024, "served_by": "long"},
                {"name": "short", "max_model_len": 2048},
                {"name": "long", "max_model_len": 8192},
            ]
        )
    )
    made: list[str] = []

    def make(pool: PoolConfig) -> object:
        made.append(pool.name)
        return object()

    engines = pool_engines(config, make)
    assert made == ["short", "long"]
    assert set(engines) == {"tiny", "short", "long"}
    assert engines["tiny"] is engines["long"] and engines["short"] is not engines["long"]


@pytest.mark.parametrize(
    ("path", "deployments"),
    [
        (DEFAULT_POOLS_PATH, {"router", "engine-long"}),
        (GPU_POOLS_PATH, {"router", "engine-short", "engine-long"}),
    ],
)
def test_serve_builds_one_deployment_per_engine_and_hands_the_router_every_pool(
    path: Path, deployments: set[str]
):
    from ray.serve._private.build_app import build_app
    from ray.serve.handle import DeploymentHandle

    from deployments.app import ROUTER_DEPLOYMENT, build_inference_app

    config = load_pools(path)
    built = build_app(build_inference_app(pools=config), name=config.app_name)
    assert {d.name for d in built.deployments} == deployments
    (router,) = [d for d in built.deployments if d.name == ROUTER_DEPLOYMENT]
    handles = router.init_args[1]
    assert set(handles) == {p.name for p in config.pools}
    for pool, handle in handles.items():
        assert isinstance(handle, DeploymentHandle)
        assert handle.deployment_name == config.engine_deployment(pool)


def test_choose_smallest_pool_that_fits_prompt_plus_output():
    config = parse_pools(two_pools())
    counts = {"short": 1000, "long": 1000}
    assert choose_pool(config, counts, max_tokens=1048) == "short"  # exactly 2048
    assert choose_pool(config, counts, max_tokens=1049) == "long"
    assert choose_pool(config, {"short": 8000, "long": 8000}, max_tokens=192) == "long"


def test_fits_nowhere_is_terminal_and_explained():
    config = parse_pools(two_pools())
    with pytest.raises(ContextTooLong) as info:
        choose_pool(config, {"short": 9000, "long": 9000}, max_tokens=100)
    assert isinstance(info.value, TerminalError)
    text = str(info.value)
    assert "9000" in text and "8192" in text and "'long'" in text


def test_pools_may_count_with_different_tokenizers():
    config = parse_pools(two_pools())
    # Under the short pool's tokenizer the prompt is too long; under the long pool's it fits.
    assert choose_pool(config, {"short": 2100, "long": 1500}, max_tokens=10) == "long"


def test_engine_kwargs_are_valid_vllm_engine_args(tmp_path: Path):
    from vllm import AsyncEngineArgs

    for path in (DEFAULT_POOLS_PATH, GPU_POOLS_PATH):
        for pool in load_pools(path).pools:
            args = AsyncEngineArgs(**pool.engine_kwargs())
            assert args.max_model_len == pool.max_model_len
            assert args.max_num_seqs == pool.max_num_seqs


@pytest.mark.parametrize("path", [DEFAULT_POOLS_PATH, GPU_POOLS_PATH])
def test_every_shipped_pool_asks_the_engine_for_compact_json(path: Path):
    # vLLM 0.32's xgrammar backend reads disable_any_whitespace from the engine's
    # structured_outputs_config only; the per-request flag is ignored.
    for pool in load_pools(path).pools:
        assert pool.engine_kwargs()["structured_outputs_config"] == {
            "backend": "xgrammar",
            "disable_any_whitespace": True,
        }


def test_structured_outputs_config_is_per_pool_and_reaches_vllm():
    from vllm import AsyncEngineArgs
    from vllm.config import StructuredOutputsConfig

    config = parse_pools(
        two_pools(
            pools=[
                {"name": "short", "max_model_len": 2048},
                {
                    "name": "long",
                    "max_model_len": 8192,
                    "structured_outputs_config": {"disable_any_whitespace": False},
                },
            ]
        )
    )
    assert config.pool("short").engine_kwargs()["structured_outputs_config"] == {
        "backend": "xgrammar",
        "disable_any_whitespace": True,
    }
    loose = config.pool("long").engine_kwargs()["structured_outputs_config"]
    assert loose == {"backend": "xgrammar", "disable_any_whitespace": False}
    # The object build_engine hands vLLM from the plain dict.
    args = AsyncEngineArgs(
        model="/models/m", structured_outputs_config=StructuredOutputsConfig(**loose)
    )
    assert args.structured_outputs_config.disable_any_whitespace is False
    with pytest.raises(ValidationError, match="extra"):
        parse_pools(two_pools(defaults={"structured_outputs_config": {"any_whitespace": 1}}))


def test_requests_no_longer_carry_the_ignored_whitespace_flag():
    from deployments.vllm_engine import sampling_params

    params = sampling_params({"type": "object"}, 16)
    assert params.structured_outputs is not None
    assert params.structured_outputs.json == {"type": "object"}
    assert not params.structured_outputs.disable_any_whitespace


def test_deployment_options_are_accepted_by_serve():
    from ray import serve

    from deployments.engine import PoolEngine

    for path in (DEFAULT_POOLS_PATH, GPU_POOLS_PATH):
        for pool in load_pools(path).engine_pools():
            deployment = serve.deployment(PoolEngine).options(**pool.deployment_options())
            assert deployment.name == pool.deployment_name


def test_serve_config_points_at_the_builder_and_the_pools_file(tmp_path: Path):
    document = serve_config(DEFAULT_POOLS_PATH)
    (app,) = document["applications"]
    assert app["import_path"] == IMPORT_PATH == "deployments.app:inference_app"
    assert app["args"]["pools_path"] == "deployments/pools.yaml"  # relative: works in any image
    assert app["route_prefix"] is None
    out = write_serve_config(tmp_path / "serve.yaml", GPU_POOLS_PATH, working_dir="s3://b/r.zip")
    written = yaml.safe_load(out.read_text())
    assert written["applications"][0]["runtime_env"] == {"working_dir": "s3://b/r.zip"}

    from ray.serve.schema import ServeDeploySchema

    ServeDeploySchema.model_validate(document)


def test_serve_config_rejects_an_invalid_pools_file(tmp_path: Path):
    bad = tmp_path / "pools.yaml"
    bad.write_text("pools: []\n")
    with pytest.raises(ValidationError):
        serve_config(bad)


# -- the bundled model ----------------------------------------------------------


def test_prepare_is_idempotent_once_marked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    target = tmp_path / "model"
    target.mkdir()
    (target / model_prepare.MARKER).write_text("{}")

    def must_not_run(source: Path, staging: Path) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(model_prepare, "_convert", must_not_run)
    assert model_prepare.prepare(target) == target
    assert model_prepare.main(["--model-dir", str(target)]) == 0


def test_prepare_is_atomic_when_conversion_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    target = tmp_path / "model"

    def half_then_crash(source: Path, staging: Path) -> None:
        (staging / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("killed")

    monkeypatch.setattr(model_prepare, "_convert", half_then_crash)
    with pytest.raises(RuntimeError, match="killed"):
        model_prepare.prepare(target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left behind


def test_prepare_replaces_an_unmarked_leftover(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "stale").write_text("x")

    def convert(source: Path, staging: Path) -> None:
        (staging / "config.json").write_text("{}")

    monkeypatch.setattr(model_prepare, "_convert", convert)
    model_prepare.prepare(target)
    assert {p.name for p in target.iterdir()} == {"config.json", model_prepare.MARKER}
    assert model_prepare.is_prepared(target)


def test_gguf_is_found_in_the_installed_package_without_importing_it():
    path = model_prepare.gguf_path()
    assert path.name == model_prepare.GGUF_FILE
    assert path.stat().st_size > 50_000_000


def test_cache_dir_is_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("FENCELINE_MODEL_CACHE", str(tmp_path / "x"))
    assert model_prepare.default_model_dir() == tmp_path / "x"
    monkeypatch.delenv("FENCELINE_MODEL_CACHE")
    assert model_prepare.default_model_dir().parts[-3:] == (
        "fenceline",
        "models",
        "smollm2-135m-instruct",
    )
    assert PoolConfig(name="p", max_model_len=10).resolved_model() == str(
        model_prepare.default_model_dir()
    )


# -- errors crossing Serve --------------------------------------------------------


def test_serve_errors_unwrap_to_the_classified_cause():
    from ray.exceptions import RayTaskError

    from deployments.router import unwrap_serve_error
    from pipeline.errors import ProviderRateLimited, ProviderUnavailable

    cause = ProviderRateLimited("slow down", retry_after=3.0)
    wrapped = RayTaskError("complete", "traceback", cause).as_instanceof_cause()
    assert isinstance(wrapped, ProviderRateLimited)  # Ray's dual class, without our attributes
    unwrapped = unwrap_serve_error(RayTaskError("outer", "tb", wrapped))
    assert unwrapped is cause and unwrapped.retry_after == 3.0

    other = unwrap_serve_error(RuntimeError("replica died"))
    assert isinstance(other, ProviderUnavailable) and other.uncertain


def test_the_shipped_default_compiles_and_eager_is_a_copy_for_short_runs() -> None:
    shipped = load_pools()
    assert [p.enforce_eager for p in shipped.pools] == [False] * len(shipped.pools)
    eager = shipped.eager()
    assert [p.enforce_eager for p in eager.pools] == [True] * len(shipped.pools)
    assert all(p.engine_kwargs()["enforce_eager"] for p in eager.pools)
    assert not any(p.enforce_eager for p in shipped.pools)  # the original is unchanged
    assert [p.name for p in eager.pools] == [p.name for p in shipped.pools]


def test_a_run_may_deploy_a_subset_of_the_pools_and_names_a_wrong_one() -> None:
    from cluster.runtime import ClusterConfig
    from pipeline.settings import Settings

    shipped = load_pools()
    long = shipped.only(["long"])
    assert [p.name for p in long.pools] == ["long"]
    assert [p.name for p in shipped.pools] == ["short", "long"]  # the original is unchanged
    with pytest.raises(ValueError, match=r"\['medium'\]"):
        shipped.only(["short", "medium"])
    with pytest.raises(ValueError, match="no pools"):
        shipped.only([])
    subset = ClusterConfig(Settings(), pools=("long",), eager=True).serve_pools()
    assert [(p.name, p.enforce_eager) for p in subset.pools] == [("long", True)]
    # The demo deploys the default: both pools, one engine.
    default = ClusterConfig(Settings(), eager=True).serve_pools()
    assert [p.name for p in default.pools] == ["short", "long"]
    assert default.engine_deployments() == ["engine-long"]


# -- LoRA adapters ------------------------------------------------------------------


def write_adapter(folder: Path, rank: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 8)
    return folder


def test_a_pool_with_an_adapter_enables_lora_in_the_engine(tmp_path: Path):
    from vllm import AsyncEngineArgs

    adapter = {"name": "invoices", "path": str(tmp_path / "a"), "max_rank": 16}
    config = parse_pools(two_pools(defaults={"model": "/models/m", "lora": adapter}))
    for pool in config.pools:
        kwargs = pool.engine_kwargs()
        assert kwargs["enable_lora"] is True
        assert kwargs["max_lora_rank"] == 16
        assert kwargs["max_loras"] == 1
        assert kwargs["structured_outputs_config"]["disable_any_whitespace"] is True
        args = AsyncEngineArgs(**kwargs)
        assert args.enable_lora and args.max_lora_rank == 16
    plain = parse_pools(two_pools()).pool("short").engine_kwargs()
    assert not {"enable_lora", "max_lora_rank", "max_loras"} & plain.keys()


def test_relative_adapter_paths_resolve_against_the_project_root():
    adapter = LoraAdapter(name="x", path="deployments/adapters/x")
    assert adapter.resolved_path() == PROJECT_ROOT / "deployments" / "adapters" / "x"
    assert (PROJECT_ROOT / "deployments" / "pools.py").is_file()  # the folder holding the code
    assert LoraAdapter(name="x", path="/abs/x").resolved_path() == Path("/abs/x")


def test_a_missing_adapter_is_refused_naming_the_path_and_the_fix(tmp_path: Path):
    from deployments.engine import PoolEngine
    from deployments.vllm_engine import lora_request

    adapter = {"name": "invoices", "path": str(tmp_path / "absent")}
    pool = parse_pools(two_pools(defaults={"lora": adapter})).pool("short")
    with pytest.raises(FileNotFoundError) as info:
        lora_request(pool)
    message = str(info.value)
    assert str(tmp_path / "absent") in message and "make adapter" in message
    assert "adapter_model.safetensors" in message
    with pytest.raises(FileNotFoundError):  # before any engine starts
        PoolEngine(pool)


def test_an_adapter_of_higher_rank_than_the_pool_allows_is_refused(tmp_path: Path):
    from deployments.vllm_engine import lora_request

    folder = write_adapter(tmp_path / "a", rank=32)
    pool = parse_pools(
        two_pools(defaults={"lora": {"name": "a", "path": str(folder), "max_rank": 16}})
    ).pool("short")
    with pytest.raises(ValueError, match=r"rank 32 > lora\.max_rank 16"):
        lora_request(pool)


def test_a_present_adapter_becomes_every_requests_lora_request(tmp_path: Path):
    from deployments.vllm_engine import lora_request

    folder = write_adapter(tmp_path / "a", rank=8)
    pool = parse_pools(
        two_pools(defaults={"lora": {"name": "invoices", "path": str(folder)}})
    ).pool("long")
    request = lora_request(pool)
    assert request is not None
    assert (request.lora_name, request.lora_int_id, request.lora_path) == (
        "invoices",
        1,
        str(folder),
    )
    assert lora_request(parse_pools(two_pools()).pool("long")) is None


def test_an_adapter_trained_on_another_prompt_is_named_stale(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    from deployments.vllm_engine import lora_request, stale_adapter
    from pipeline.extraction import prompt_version

    folder = write_adapter(tmp_path / "a")
    pool = parse_pools(
        two_pools(defaults={"lora": {"name": "invoices", "path": str(folder)}})
    ).pool("long")
    assert "does not name" in (stale_adapter(pool) or "")  # no manifest.json
    (folder / "manifest.json").write_text(json.dumps({"prompt_version": "fenceline.prompt/2"}))
    with caplog.at_level("WARNING", logger="deployments.vllm_engine"):
        assert lora_request(pool) is not None  # it still runs
    stale = stale_adapter(pool)
    assert stale is not None and stale in caplog.text
    assert "fenceline.prompt/2" in stale and prompt_version() in stale
    assert "make adapter" in stale
    (folder / "manifest.json").write_text(json.dumps({"prompt_version": prompt_version()}))
    assert stale_adapter(pool) is None
    assert stale_adapter(parse_pools(two_pools()).pool("long")) is None  # no adapter


def test_the_committed_adapter_was_trained_on_the_prompt_it_is_served():
    """Fails when the prompt changes and the adapter is not retrained (`make adapter`)."""
    from deployments.vllm_engine import stale_adapter

    for pool in load_pools(DEFAULT_POOLS_PATH).pools:
        assert stale_adapter(pool) is None, stale_adapter(pool)


@pytest.mark.parametrize("rank", [0, 4, 12, 1000])
def test_lora_rank_must_be_one_vllm_accepts(rank: int):
    with pytest.raises(ValidationError, match="max_rank"):
        parse_pools(two_pools(defaults={"lora": {"name": "a", "path": "x", "max_rank": rank}}))


def test_the_cpu_pools_serve_the_invoice_adapter_and_the_gpu_pools_none():
    for pool in load_pools(DEFAULT_POOLS_PATH).pools:
        assert pool.lora is not None
        assert pool.lora.resolved_path() == PROJECT_ROOT / "deployments/adapters/smollm2-invoices"
        assert pool.engine_kwargs()["enable_lora"] is True
    # The SmolLM2 adapter does not fit the GPU profile's Llama.
    assert all(pool.lora is None for pool in load_pools(GPU_POOLS_PATH).pools)
