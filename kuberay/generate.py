"""Generate the ``serveConfigV2`` of the RayService manifests from the pools file.

``python -m kuberay.generate`` rewrites, in place, the ``serveConfigV2: |``
block of every manifest under ``kuberay/`` that names its pools file in the
annotation ``fenceline.dev/pools-file`` (the file ``fenceline up`` reads, e.g.
``deployments/pools.yaml``); ``--check`` changes nothing, prints a diff and
exits 1 when a manifest is stale. The rest of each file (comments included) is
left as written.

The Serve config has three applications:

* ``intake`` (``deployments.intake:intake_app``, route ``/``): the REST API;
  replicas and CPUs follow the pools file's ``router`` section (the front door
  is sized with the router it feeds);
* the inference app (``deployments.app:inference_app`` with
  ``args.pools_path``): the context-length router and one vLLM deployment per
  pool, as ``deployments.app.serve_config`` writes it, plus
  ``args.pools_sha256``, the digest of the pools file (engine settings such as
  ``max_model_len`` are read from the file at deploy time and appear nowhere
  else in the config);
* ``fenceline-runtime`` (``cluster.supervisor:runtime_app``): drivers,
  admission, delivery and maintenance actors, sized by
  :func:`cluster.runtime_config.runtime_config_for`.

A manifest that also carries ``fenceline.dev/engine: openai`` is a hosted-provider
deployment (:func:`provider_runtime_config`): no inference app, a runtime whose
drivers call an OpenAI-compatible provider through one global admission scope,
``provider``, whose URL, model and budgets come from ``FENCELINE_PROVIDER_*`` in
the settings ConfigMap; the pools file then sizes the intake only.

Each application also lists its ``deployments`` with their options
(replicas or autoscaling, ``ray_actor_options`` with ``num_gpus``, placement
group bundles for tensor parallelism, ...), produced the way ``serve build``
produces them: by importing the builder, calling it with the application's
``args`` and converting every bound deployment with Serve's own
``deployment_to_schema``. In a Serve config those options override the code's,
so the manifest shows — and pins — the resources the cluster will schedule.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from cluster.runtime_config import RuntimeConfig

ROOT = Path(__file__).resolve().parent.parent
KUBERAY_DIR = ROOT / "kuberay"
POOLS_ANNOTATION = "fenceline.dev/pools-file"
#: ``openai``: the manifest deploys the hosted-provider runtime, no inference app.
ENGINE_ANNOTATION = "fenceline.dev/engine"
ENGINES = ("serve", "openai")
#: The hosted provider's one admission scope (its budgets are the provider project's).
PROVIDER_SCOPE = "provider"
#: Leases of the hosted-provider runtime at start: drivers × concurrency. The provider
#: scope's admission actor bounds the calls in flight (FENCELINE_PROVIDER_CONCURRENCY),
#: so leases beyond it only wait there; driver autoscaling adds drivers on a backlog.
PROVIDER_DRIVERS = 2
PROVIDER_DRIVER_CONCURRENCY = 16
HTTP_PORT = 8000

INTAKE_APP = "intake"
INTAKE_IMPORT_PATH = "deployments.intake:intake_app"
RUNTIME_APP = "fenceline-runtime"
RUNTIME_IMPORT_PATH = "cluster.supervisor:runtime_app"

_BLOCK = re.compile(r"^(?P<indent>[ ]*)serveConfigV2:[ ]*\|[-+]?[ ]*$")


def provider_runtime_config() -> RuntimeConfig:
    """The runtime of a hosted-provider deployment: the ``openai`` engine with its URL
    and model left to ``FENCELINE_PROVIDER_URL`` / ``_MODEL``, and one admission scope
    whose limits the supervisor reads from ``FENCELINE_PROVIDER_RPM``/``_TPM``/``_TPD``/
    ``_CONCURRENCY`` (:meth:`RuntimeConfig.admission_scopes`)."""
    from cluster.runtime_config import RuntimeConfig

    return RuntimeConfig(
        engine="openai",
        admission_scope=PROVIDER_SCOPE,
        drivers=PROVIDER_DRIVERS,
        concurrency=PROVIDER_DRIVER_CONCURRENCY,
    )


def serve_config(pools_file: str | Path, engine: str = "serve") -> dict[str, Any]:
    """The whole Serve config (``serveConfigV2``) for a pools file, validated by Serve.

    Relative paths in it (``args.pools_path``) are relative to the project root,
    which is the working directory of the Ray processes in the image. ``engine``
    ``openai``: the hosted-provider config (no inference app; the pools file sizes
    the intake only).
    """
    if engine not in ENGINES:
        raise ValueError(f"{ENGINE_ANNOTATION} must be one of {ENGINES}, not {engine!r}")
    from ray.serve.schema import ServeDeploySchema

    from cluster.runtime_config import runtime_config_for
    from deployments.app import serve_config as inference_serve_config
    from deployments.pools import load_pools

    path = _project_path(pools_file)
    pools = load_pools(path)
    provider = engine == "openai"
    runtime = provider_runtime_config() if provider else runtime_config_for(pools)
    applications: list[dict[str, Any]] = [
        {
            "name": INTAKE_APP,
            "route_prefix": "/",
            "import_path": INTAKE_IMPORT_PATH,
            # model_pools: the pools a request's model_policy may name (refused otherwise).
            "args": {
                "num_replicas": pools.router.replicas,
                "num_cpus": pools.router.num_cpus,
                "model_pools": [] if provider else [p.name for p in pools.pools],
            },
        },
    ]
    if not provider:
        inference = inference_serve_config(path)["applications"][0]
        # The replicas read the pools file from the image; its digest in the args makes
        # every change of it a change of serveConfigV2, so `--check` catches a stale
        # manifest and KubeRay redeploys the app when the file changes.
        inference["args"]["pools_sha256"] = pools_digest(path)
        applications.append(inference)
    applications.append(
        {
            "name": RUNTIME_APP,
            "route_prefix": None,
            "import_path": RUNTIME_IMPORT_PATH,
            "args": runtime.model_dump(exclude_none=True),
        }
    )
    for app in applications:
        app["deployments"] = built_deployments(app["import_path"], app.get("args", {}), app["name"])
    config: dict[str, Any] = {
        # A proxy on every node: the Serve Service of the RayService then has an
        # endpoint per Ray pod, and losing one pod never takes HTTP down.
        "proxy_location": "EveryNode",
        "http_options": {"host": "0.0.0.0", "port": HTTP_PORT},
        "applications": applications,
    }
    ServeDeploySchema.model_validate(config)
    return config


def pools_digest(path: Path) -> str:
    """sha256 of the pools file's *content* (``args.pools_sha256``).

    Canonical JSON of the parsed YAML: a comment or a reformatting does not
    change it, any changed value does.
    """
    canonical = json.dumps(yaml.safe_load(path.read_text()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def built_deployments(import_path: str, args: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """What ``serve build`` writes for one application: each deployment's explicit options."""
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.build_app import build_app
    from ray.serve.deployment import deployment_to_schema

    app = call_user_app_builder_with_args_if_necessary(import_attr(import_path), dict(args))
    built = build_app(app, name=name)
    return [
        deployment_to_schema(d).model_dump(exclude_unset=True, mode="json")
        for d in built.deployments
    ]


def render_block(config: dict[str, Any]) -> str:
    """The YAML text that goes inside ``serveConfigV2: |``."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=100)


# ----------------------------------------------------------------------- manifests


@dataclass(frozen=True)
class ServeConfigSite:
    """One ``serveConfigV2`` block in a manifest file, the pools file it comes from and
    what its drivers call (``serve`` or ``openai``)."""

    manifest: Path
    pools_file: str
    engine: str = "serve"


def sites(root: Path = KUBERAY_DIR) -> list[ServeConfigSite]:
    """Every manifest document that carries both ``serveConfigV2`` and the pools annotation."""
    found: list[ServeConfigSite] = []
    for manifest in sorted(root.rglob("*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            if not isinstance(doc, dict) or "serveConfigV2" not in (doc.get("spec") or {}):
                continue
            annotations = (doc.get("metadata") or {}).get("annotations") or {}
            pools_file = annotations.get(POOLS_ANNOTATION)
            if not pools_file:
                raise ValueError(
                    f"{manifest}: a serveConfigV2 without the {POOLS_ANNOTATION} annotation "
                    "cannot be kept in sync with a pools file"
                )
            engine = str(annotations.get(ENGINE_ANNOTATION, "serve"))
            found.append(ServeConfigSite(manifest, str(pools_file), engine))
    return found


def rewrite(text: str, block: str) -> str:
    """``text`` with the body of its one ``serveConfigV2: |`` block replaced by ``block``."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _BLOCK.match(line.rstrip("\n"))]
    if len(starts) != 1:
        raise ValueError(f"expected one 'serveConfigV2: |' block, found {len(starts)}")
    start = starts[0]
    match = _BLOCK.match(lines[start].rstrip("\n"))
    assert match is not None
    indent = len(match.group("indent"))
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and len(line) - len(line.lstrip(" ")) <= indent:
            break
        end += 1
    while end > start + 1 and not lines[end - 1].strip():  # keep blank lines after the block
        end -= 1
    pad = " " * (indent + 2)
    body = [f"{pad}{line}\n" if line else "\n" for line in block.rstrip("\n").split("\n")]
    head = " " * indent + "serveConfigV2: |\n"
    return "".join([*lines[:start], head, *body, *lines[end:]])


def embedded_config(text: str) -> dict[str, Any]:
    """The parsed ``serveConfigV2`` of the one document in ``text`` that has it."""
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and "serveConfigV2" in (doc.get("spec") or {}):
            parsed: dict[str, Any] = yaml.safe_load(doc["spec"]["serveConfigV2"])
            return parsed
    raise ValueError("no serveConfigV2 in this manifest")


def expected_texts(root: Path = KUBERAY_DIR) -> Iterator[tuple[Path, str, str]]:
    """``(manifest, current text, regenerated text)`` for every serveConfigV2 site."""
    cache: dict[tuple[str, str], str] = {}
    for site in sites(root):
        key = (site.pools_file, site.engine)
        if key not in cache:
            cache[key] = render_block(serve_config(site.pools_file, site.engine))
        current = site.manifest.read_text()
        yield site.manifest, current, rewrite(current, cache[key])


def _project_path(pools_file: str | Path) -> Path:
    path = Path(pools_file)
    return path if path.is_absolute() else ROOT / path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kuberay.generate",
        description="Regenerate the serveConfigV2 of the KubeRay manifests from the pools files.",
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 and show a diff if stale"
    )
    parser.add_argument(
        "--print",
        metavar="POOLS_FILE",
        dest="print_pools",
        help="print the Serve config for one pools file (for `serve deploy`) and exit",
    )
    args = parser.parse_args(argv)
    if args.print_pools:
        sys.stdout.write(render_block(serve_config(args.print_pools)))
        return 0
    stale = 0
    for manifest, current, expected in expected_texts():
        rel = manifest.relative_to(ROOT)
        if current == expected:
            print(f"up to date: {rel}")
            continue
        stale += 1
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    fromfile=f"{rel} (committed)",
                    tofile=f"{rel} (from its pools file)",
                )
            )
        else:
            manifest.write_text(expected)
            print(f"regenerated: {rel}")
    if args.check and stale:
        print(f"{stale} manifest(s) out of date: run `python -m kuberay.generate`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
