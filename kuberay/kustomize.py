"""A small kustomize renderer for the overlays under ``kuberay/``, so tests need no binary.

It implements exactly the kustomization fields the schema in
``kuberay/schemas/kustomization-v1beta1.json`` admits (anything else is
rejected there), with the semantics ``kustomize`` v5 applies to *custom*
resources such as ``RayService``, whose OpenAPI schema kustomize does not know:

* ``resources``: files (every YAML document) or directories (rendered first);
* ``components``: ``kind: Component`` directories, applied after the
  resources and before this kustomization's own transformers;
* ``patches``: strategic-merge patches (a mapping: maps merge key by key, a
  ``null`` deletes a key, ``$patch: replace|delete`` on a map, and **lists are
  replaced whole** — kustomize has no merge keys for CRD lists, so a patch of
  ``containers`` replaces every container) and JSON 6902 patches (a list of
  ``add``/``remove``/``replace``/``move``/``copy``/``test`` operations, the
  way to append a worker group or a toleration);
* then ``namespace``, ``labels`` (metadata only), ``commonAnnotations`` and
  ``images`` (every ``containers``/``initContainers`` ``image`` anywhere in a
  document, as kustomize's image transformer does for unknown kinds).

``tests/unit/test_kuberay.py`` renders every overlay with this module *and*
with ``kubectl kustomize`` and asserts the two agree, so the renderer cannot
drift from the tool operators run.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kuberay.validation import ManifestError, load_documents, validate_document

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

Document = dict[str, Any]


def kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise ManifestError(f"{directory}: no kustomization file")


def load_kustomization(directory: Path, *, kind: str = "Kustomization") -> Document:
    """Parse and schema-check a kustomization (or component) file."""
    path = kustomization_file(directory)
    docs = load_documents(path)
    if len(docs) != 1:
        raise ManifestError(f"{path}: expected one document, found {len(docs)}")
    doc = docs[0]
    if doc.get("kind") != kind:
        raise ManifestError(f"{path}: kind {doc.get('kind')!r}, expected {kind}")
    findings = validate_document(doc, source=str(path))
    if findings:
        raise ManifestError("\n".join(str(f) for f in findings))
    return doc


def render(directory: str | Path) -> list[Document]:
    """The resources ``kubectl kustomize <directory>`` would print, as parsed documents."""
    return _render(Path(directory).resolve(), "Kustomization", [])


def _render(directory: Path, kind: str, base: list[Document]) -> list[Document]:
    spec = load_kustomization(directory, kind=kind)
    resources = base
    for entry in spec.get("resources", []):
        target = (directory / entry).resolve()
        if target.is_dir():
            _add(resources, _render(target, "Kustomization", []), source=str(target))
        elif target.is_file():
            _add(resources, load_documents(target), source=str(target))
        else:
            raise ManifestError(f"{directory}: resource {entry!r} does not exist")
    for entry in spec.get("components", []):
        resources = _render((directory / entry).resolve(), "Component", resources)
    for patch_spec in spec.get("patches", []):
        _apply_patch(resources, patch_spec, directory)
    if "namespace" in spec:
        for doc in resources:
            doc.setdefault("metadata", {})["namespace"] = spec["namespace"]
    for label_spec in spec.get("labels", []):
        if label_spec.get("includeSelectors") or label_spec.get("includeTemplates"):
            raise ManifestError(
                f"{directory}: labels with includeSelectors/includeTemplates are not "
                "supported (kustomize cannot find the templates of a custom resource)"
            )
        for doc in resources:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(label_spec["pairs"])
    if "commonAnnotations" in spec:
        for doc in resources:
            meta = doc.setdefault("metadata", {})
            meta.setdefault("annotations", {}).update(spec["commonAnnotations"])
    for image in spec.get("images", []):
        for doc in resources:
            _set_images(doc, image)
    return resources


def _add(resources: list[Document], new: list[Document], *, source: str) -> None:
    seen = {_identity(d) for d in resources}
    for doc in new:
        if _identity(doc) in seen:
            raise ManifestError(f"{source}: {_identity(doc)} is declared twice")
        seen.add(_identity(doc))
        resources.append(copy.deepcopy(doc))


def _identity(doc: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return (str(doc.get("apiVersion")), str(doc.get("kind")), str(meta.get("name")))


# ------------------------------------------------------------------------ patches


def _apply_patch(resources: list[Document], spec: Mapping[str, Any], directory: Path) -> None:
    if "path" in spec:
        text = (directory / spec["path"]).read_text()
        where = str(directory / spec["path"])
    else:
        text, where = spec["patch"], f"{directory} (inline patch)"
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{where}: patch does not parse: {exc}") from exc
    if isinstance(body, list):
        if "target" not in spec:
            raise ManifestError(f"{where}: a JSON 6902 patch needs a target")
        targets = [d for d in resources if _selected(d, spec["target"])]
        if not targets:
            raise ManifestError(f"{where}: target {spec['target']} matches no resource")
        for doc in targets:
            for op in body:
                json_patch(doc, op, where=where)
        return
    if not isinstance(body, dict):
        raise ManifestError(f"{where}: a patch is a mapping or a list of operations")
    selector = spec.get("target") or _selector_of(body)
    matched = [i for i, d in enumerate(resources) if _selected(d, selector)]
    if not matched:
        raise ManifestError(f"{where}: patch matches no resource ({selector})")
    for i in matched:
        patch = copy.deepcopy(body)
        if "target" in spec:  # the patch's own name/kind do not rename the target
            patch.pop("metadata", None)
            patch.pop("kind", None)
            patch.pop("apiVersion", None)
        resources[i] = strategic_merge(resources[i], patch)


def _selector_of(patch: Mapping[str, Any]) -> dict[str, str]:
    meta = patch.get("metadata") or {}
    selector = {"kind": str(patch.get("kind")), "name": str(meta.get("name"))}
    group, _, version = str(patch.get("apiVersion", "")).rpartition("/")
    selector["group"], selector["version"] = group, version
    if "namespace" in meta:
        selector["namespace"] = meta["namespace"]
    return selector


def _selected(doc: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    meta = doc.get("metadata") or {}
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    actual = {
        "group": group,
        "version": version,
        "kind": doc.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
    }
    for key in ("group", "version", "kind", "namespace"):
        if key in target and target[key] != actual[key]:
            return False
    if "name" in target and not re.fullmatch(str(target["name"]), str(actual["name"])):
        return False
    for key, field in (("labelSelector", "labels"), ("annotationSelector", "annotations")):
        if key in target:
            have = meta.get(field) or {}
            for term in str(target[key]).split(","):
                k, _, v = term.partition("=")
                if have.get(k.strip()) != v.strip():
                    return False
    return True


def strategic_merge(base: Any, patch: Any) -> Any:
    """Merge ``patch`` into ``base`` the way kustomize does for a custom resource.

    Maps merge recursively, ``None`` deletes a key, a map carrying
    ``$patch: replace`` replaces and ``$patch: delete`` removes; any other value,
    lists included, replaces.
    """
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        body = {k: v for k, v in patch.items() if k != "$patch"}
        if directive == "delete":
            return None
        if directive == "replace" or not isinstance(base, dict):
            return _strip_nulls(body)
        merged = dict(base)
        for key, value in body.items():
            if value is None:
                merged.pop(key, None)
                continue
            result = strategic_merge(merged.get(key), value)
            if result is None:
                merged.pop(key, None)
            else:
                merged[key] = result
        return merged
    return copy.deepcopy(patch)


def _strip_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_nulls(v) for k, v in node.items() if v is not None and k != "$patch"}
    if isinstance(node, list):
        return [_strip_nulls(v) for v in node]
    return node


def json_patch(doc: Document, op: Mapping[str, Any], *, where: str = "<patch>") -> None:
    """Apply one RFC 6902 operation to ``doc`` in place."""
    kind = op.get("op")
    try:
        if kind == "add":
            _put(doc, op["path"], copy.deepcopy(op["value"]), insert=True)
        elif kind == "replace":
            _get(doc, op["path"])  # must exist
            _put(doc, op["path"], copy.deepcopy(op["value"]), insert=False)
        elif kind == "remove":
            _remove(doc, op["path"])
        elif kind == "test":
            if _get(doc, op["path"]) != op["value"]:
                raise ManifestError(f"{where}: test failed at {op['path']}")
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, op["from"]))
            if kind == "move":
                _remove(doc, op["from"])
            _put(doc, op["path"], value, insert=True)
        else:
            raise ManifestError(f"{where}: unknown operation {kind!r}")
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        if isinstance(exc, ManifestError):
            raise
        raise ManifestError(f"{where}: {kind} {op.get('path')}: {exc!r}") from exc


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ManifestError(f"JSON pointer {pointer!r} must start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _walk(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def _get(doc: Any, pointer: str) -> Any:
    return _walk(doc, _tokens(pointer))


def _put(doc: Any, pointer: str, value: Any, *, insert: bool) -> None:
    tokens = _tokens(pointer)
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif insert:
            parent.insert(int(last), value)
        else:
            parent[int(last)] = value
    else:
        parent[last] = value


def _remove(doc: Any, pointer: str) -> None:
    tokens = _tokens(pointer)
    parent = _walk(doc, tokens[:-1])
    if isinstance(parent, list):
        del parent[int(tokens[-1])]
    else:
        del parent[tokens[-1]]


# ------------------------------------------------------------------------- images


def _set_images(doc: Any, image: Mapping[str, Any]) -> None:
    for container in _containers(doc):
        current = container.get("image")
        if not isinstance(current, str):
            continue
        name, tag, digest = _split_image(current)
        if name != image["name"]:
            continue
        name = image.get("newName", name)
        if "digest" in image:
            container["image"] = f"{name}@{image['digest']}"
        elif "newTag" in image:
            container["image"] = f"{name}:{image['newTag']}"
        else:
            container["image"] = name + (f"@{digest}" if digest else f":{tag}" if tag else "")


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def _split_image(image: str) -> tuple[str, str | None, str | None]:
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1 :], digest or None
    return name, None, digest or None
