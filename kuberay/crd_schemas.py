"""Build the JSON schemas under ``kuberay/schemas/`` that the offline validator uses.

This is a development-time tool, run by hand when the KubeRay or Kubernetes API
version we target moves; its output is committed and the tests only read the
JSON. Two sources:

* **Kubernetes core types** (PodTemplateSpec, Service, Secret, ConfigMap,
  EnvVar, ResourceRequirements, ...) come from the official Kubernetes Python
  client, whose models are pydantic classes generated from the Kubernetes
  OpenAPI document (release 1.37 for ``kubernetes==37.0.2``). Their JSON schema
  already forbids unknown fields and marks required ones.
* **KubeRay types** (RayService, RayCluster, RayJob ``ray.io/v1``) are
  transcribed below from the KubeRay Go API types
  (``ray-operator/apis/ray/v1/*_types.go``): field names, ``omitempty``/
  ``+optional`` for required-ness and the ``+kubebuilder:validation:Enum``
  markers. The CRD YAML generated from those types inlines every PodTemplateSpec
  (~0.8 MB per CRD); here they are ``$ref``s into the core definitions instead.
  ``schemas/upstream-kuberay-v1-fields.json`` lists upstream's field names and
  required sets (KubeRay master, read 2026-12-01); ``tests/unit/test_kuberay.py``
  fails when this transcription and that list differ. Update both together.

Unlike a plain CRD, every object is *closed* (``additionalProperties: false``),
the equivalent of ``kubeconform -strict`` and of ``kubectl apply``'s default
server-side field validation: a misspelt field is an error, never silently
pruned.

PodMonitor and Kustomization schemas are hand-written subsets (the fields these
manifests and the in-repo renderer use); extend them when a manifest needs more.

Usage (needs the Kubernetes client, which the project itself does not)::

    python -m venv /tmp/k8s && /tmp/k8s/bin/pip install kubernetes==37.0.2
    /tmp/k8s/bin/python -m kuberay.crd_schemas
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).with_name("schemas")
DIALECT = "https://json-schema.org/draft/2020-12/schema"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY: dict[str, Any] = {
    "anyOf": [
        {"type": "integer"},
        {"type": "number"},
        {"type": "string", "pattern": QUANTITY_PATTERN},
    ]
}
INT32: dict[str, Any] = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
STR: dict[str, Any] = {"type": "string"}
#: Prometheus durations as prometheus-operator validates them (``30s``, ``1m30s``).
DURATION_PATTERN = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    r"(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
RELABEL_ACTIONS = (
    "replace Replace keep Keep drop Drop hashmod HashMod labelmap LabelMap labeldrop LabelDrop "
    "labelkeep LabelKeep lowercase Lowercase uppercase Uppercase keepequal KeepEqual "
    "dropequal DropEqual"
).split()
BOOL: dict[str, Any] = {"type": "boolean"}
STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": STR}
STR_LIST: dict[str, Any] = {"type": "array", "items": STR}

#: (core definition, property) pairs whose Go type is resource.Quantity; the
#: Python client types them as plain strings, Kubernetes accepts numbers too.
QUANTITY_FIELDS = {
    ("V1ResourceRequirements", "limits"): "map",
    ("V1ResourceRequirements", "requests"): "map",
    ("V1VolumeResourceRequirements", "limits"): "map",
    ("V1VolumeResourceRequirements", "requests"): "map",
    ("V1PodSpec", "overhead"): "map",
    ("V1EmptyDirVolumeSource", "sizeLimit"): "scalar",
    ("V1ResourceFieldSelector", "divisor"): "scalar",
}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


# --------------------------------------------------------------------- KubeRay v1


def kuberay_defs() -> dict[str, Any]:
    """KubeRay ``ray.io/v1`` spec types, as in ``raycluster_types.go`` and friends."""
    redis_credential = closed({"valueFrom": ref("V1EnvVarSource"), "value": STR})
    network_rules = closed(
        {
            "ingressRules": array(ref("V1NetworkPolicyIngressRule")),
            "egressRules": array(ref("V1NetworkPolicyEgressRule")),
        }
    )
    worker_group_rules = closed({"groupName": STR, **network_rules["properties"]}, ("groupName",))
    return {
        "RayClusterSpec": closed(
            {
                "upgradeStrategy": closed({"type": enum("Recreate", "None")}),
                "authOptions": closed(
                    {
                        "enableK8sTokenAuth": BOOL,
                        "secretName": STR,
                        "mode": enum("disabled", "token"),
                    }
                ),
                "suspend": BOOL,
                "managedBy": enum("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"),
                "autoscalerOptions": ref("AutoscalerOptions"),
                "headServiceAnnotations": STR_MAP,
                "enableInTreeAutoscaling": BOOL,
                "gcsFaultToleranceOptions": closed(
                    {
                        "backend": enum("redis", "rocksdb"),
                        "redisUsername": redis_credential,
                        "redisPassword": redis_credential,
                        "externalStorageNamespace": STR,
                        "redisAddress": STR,
                        "storage": closed(
                            {
                                "claimName": STR,
                                "size": QUANTITY,
                                "storageClassName": STR,
                                "accessModes": STR_LIST,
                                "subPath": STR,
                                "deletionPolicy": enum("DeleteWithCluster", "Retain"),
                            }
                        ),
                    }
                ),
                "historyServerOptions": closed(
                    {
                        "collectorOptions": closed(
                            {
                                "image": STR,
                                "imagePullPolicy": STR,
                                "resources": ref("V1ResourceRequirements"),
                                "env": array(ref("V1EnvVar")),
                            }
                        )
                    }
                ),
                "networkPolicy": closed(
                    {
                        "mode": enum("DenyAll", "DenyAllIngress", "DenyAllEgress"),
                        "head": network_rules,
                        "worker": network_rules,
                        "workerGroups": array(worker_group_rules),
                    }
                ),
                "tlsOptions": closed({"enabled": BOOL}),
                "headGroupSpec": ref("HeadGroupSpec"),
                "rayVersion": STR,
                "workerGroupSpecs": array(ref("WorkerGroupSpec")),
            },
            ("headGroupSpec",),
        ),
        "HeadGroupSpec": closed(
            {
                "template": ref("V1PodTemplateSpec"),
                "headService": ref("V1Service"),
                "enableIngress": BOOL,
                "ingressOptions": closed(
                    {
                        "host": STR,
                        "path": STR,
                        "pathType": enum("Exact", "Prefix", "ImplementationSpecific"),
                        "tls": array(ref("V1IngressTLS")),
                    }
                ),
                "resources": STR_MAP,
                "labels": STR_MAP,
                "rayStartParams": STR_MAP,
                "serviceType": STR,
            },
            ("template",),
        ),
        "WorkerGroupSpec": closed(
            {
                "suspend": BOOL,
                "groupName": STR,
                "replicas": INT32,
                "minReplicas": INT32,
                "maxReplicas": INT32,
                "idleTimeoutSeconds": INT32,
                "priority": INT32,
                "resources": STR_MAP,
                "labels": STR_MAP,
                "rayStartParams": STR_MAP,
                "template": ref("V1PodTemplateSpec"),
                "scaleStrategy": closed({"workersToDelete": STR_LIST}),
                "numOfHosts": INT32,
            },
            ("groupName", "minReplicas", "maxReplicas", "template"),
        ),
        "AutoscalerOptions": closed(
            {
                "resources": ref("V1ResourceRequirements"),
                "image": STR,
                "imagePullPolicy": STR,
                "securityContext": ref("V1SecurityContext"),
                "idleTimeoutSeconds": INT32,
                "upscalingMode": enum("Default", "Aggressive", "Conservative"),
                "version": enum("v1", "v2"),
                "env": array(ref("V1EnvVar")),
                "envFrom": array(ref("V1EnvFromSource")),
                "volumeMounts": array(ref("V1VolumeMount")),
                "command": STR_LIST,
                "args": STR_LIST,
            }
        ),
        "RayServiceSpec": closed(
            {
                "rayClusterDeletionDelaySeconds": {**INT32, "minimum": 0},
                "serviceUnhealthySecondThreshold": INT32,
                "deploymentUnhealthySecondThreshold": INT32,
                "serveService": ref("V1Service"),
                "upgradeStrategy": closed(
                    {
                        "type": enum("NewClusterWithIncrementalUpgrade", "NewCluster", "None"),
                        "clusterUpgradeOptions": closed(
                            {
                                "maxSurgePercent": INT32,
                                "stepSizePercent": INT32,
                                "intervalSeconds": INT32,
                                "gatewayClassName": STR,
                            },
                            ("stepSizePercent", "intervalSeconds", "gatewayClassName"),
                        ),
                    }
                ),
                "serveConfigV2": STR,
                "rayClusterConfig": ref("RayClusterSpec"),
                "excludeHeadPodFromServeSvc": BOOL,
            },
            ("rayClusterConfig",),
        ),
        "RayJobSpec": closed(
            {
                "activeDeadlineSeconds": INT32,
                "backoffLimit": INT32,
                "rayClusterSpec": ref("RayClusterSpec"),
                "submitterPodTemplate": ref("V1PodTemplateSpec"),
                "metadata": STR_MAP,
                "clusterSelector": STR_MAP,
                "submitterConfig": closed({"backoffLimit": INT32}),
                "managedBy": enum("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"),
                "deletionStrategy": closed(
                    {
                        "onSuccess": closed({"policy": ref("DeletionPolicyType")}),
                        "onFailure": closed({"policy": ref("DeletionPolicyType")}),
                        "deletionRules": {
                            **array(
                                closed(
                                    {
                                        "policy": ref("DeletionPolicyType"),
                                        "condition": closed(
                                            {
                                                "jobStatus": enum("SUCCEEDED", "FAILED"),
                                                "jobDeploymentStatus": enum("Failed"),
                                                "ttlSeconds": {**INT32, "minimum": 0},
                                            }
                                        ),
                                    },
                                    ("policy", "condition"),
                                )
                            ),
                            "minItems": 1,
                        },
                    }
                ),
                "entrypoint": STR,
                "runtimeEnvYAML": STR,
                "jobId": STR,
                "submissionMode": enum("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"),
                "entrypointResources": STR,
                "entrypointNumCpus": {"type": "number"},
                "entrypointNumGpus": {"type": "number"},
                "ttlSecondsAfterFinished": INT32,
                "shutdownAfterJobFinishes": BOOL,
                "suspend": BOOL,
            }
        ),
        "DeletionPolicyType": enum("DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"),
    }


# ------------------------------------------------------------ Prometheus operator


def podmonitor_defs() -> dict[str, Any]:
    """A subset of ``monitoring.coreos.com/v1`` PodMonitor (prometheus-operator)."""
    relabel = closed(
        {
            "action": enum(*RELABEL_ACTIONS),
            "modulus": {"type": "integer"},
            "regex": STR,
            "replacement": STR,
            "separator": STR,
            "sourceLabels": STR_LIST,
            "targetLabel": STR,
        }
    )
    duration = {"type": "string", "pattern": DURATION_PATTERN}
    endpoint = closed(
        {
            "port": STR,
            "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
            "targetPort": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "path": STR,
            "scheme": enum("http", "https", "HTTP", "HTTPS"),
            "params": {"type": "object", "additionalProperties": STR_LIST},
            "interval": duration,
            "scrapeTimeout": duration,
            "honorLabels": BOOL,
            "honorTimestamps": BOOL,
            "filterRunning": BOOL,
            "relabelings": array(relabel),
            "metricRelabelings": array(relabel),
        }
    )
    return {
        "PodMonitorSpec": closed(
            {
                "jobLabel": STR,
                "podTargetLabels": STR_LIST,
                "podMetricsEndpoints": array(endpoint),
                "selector": ref("V1LabelSelector"),
                "namespaceSelector": closed({"any": BOOL, "matchNames": STR_LIST}),
                "sampleLimit": {"type": "integer", "minimum": 0},
                "targetLimit": {"type": "integer", "minimum": 0},
                "scrapeClass": STR,
            },
            ("selector",),
        )
    }


# ---------------------------------------------------------------------- kustomize


def kustomize_defs() -> dict[str, Any]:
    """The kustomization fields :mod:`kuberay.kustomize` renders, and nothing else."""
    target = closed(
        {
            "group": STR,
            "version": STR,
            "kind": STR,
            "name": STR,
            "namespace": STR,
            "labelSelector": STR,
            "annotationSelector": STR,
        }
    )
    patch = {
        **closed({"path": STR, "patch": STR, "target": target}),
        "oneOf": [{"required": ["path"]}, {"required": ["patch"]}],
    }
    return {
        "KustomizationBody": {
            "resources": STR_LIST,
            "components": STR_LIST,
            "patches": array(patch),
            "namespace": STR,
            "namePrefix": STR,
            "labels": array(
                closed({"pairs": STR_MAP, "includeSelectors": BOOL, "includeTemplates": BOOL})
            ),
            "commonAnnotations": STR_MAP,
            "images": array(
                closed({"name": STR, "newName": STR, "newTag": STR, "digest": STR}, ("name",))
            ),
        }
    }


# ------------------------------------------------------------------- core (k8s)


def core_defs(roots: list[type]) -> dict[str, Any]:
    """Definitions reachable from ``roots`` (Kubernetes client models), trimmed."""
    defs: dict[str, Any] = {}
    for model in roots:
        schema = model.model_json_schema(by_alias=True, mode="serialization")  # type: ignore[attr-defined]
        for name, body in schema.pop("$defs", {}).items():
            defs[name] = body
        defs[model.__name__] = schema
    for name, body in defs.items():
        for prop, kind in QUANTITY_FIELDS.items():
            if prop[0] == name and prop[1] in body.get("properties", {}):
                body["properties"][prop[1]] = (
                    {"type": "object", "additionalProperties": QUANTITY}
                    if kind == "map"
                    else QUANTITY
                )
    return {name: _trim(body) for name, body in defs.items()}


def _trim(node: Any) -> Any:
    """Drop prose and defaults; turn ``anyOf: [X, null]`` (pydantic Optional) into X."""
    if isinstance(node, list):
        return [_trim(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _trim(v) for k, v in node.items() if k not in {"description", "title", "default"}}
    any_of = out.get("anyOf")
    if isinstance(any_of, list):
        rest = [s for s in any_of if s != {"type": "null"}]
        if len(rest) == 1 and len(rest) < len(any_of):
            del out["anyOf"]
            out.update(rest[0])
        elif len(rest) < len(any_of):
            out["anyOf"] = rest
    return out


def _reachable(defs: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen[name] = defs[name]
        stack.extend(_refs(defs[name]))
    return dict(sorted(seen.items()))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def resource(
    api_version: str, kind: str, spec: dict[str, Any] | None, defs: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """A top-level object schema: apiVersion/kind pinned, metadata.name required."""
    properties: dict[str, Any] = {
        "apiVersion": {"const": api_version},
        "kind": {"const": kind},
        "metadata": {"allOf": [ref("V1ObjectMeta")], "required": ["name"]},
        **extra,
    }
    required = ["apiVersion", "kind", "metadata"]
    if spec is not None:
        properties["spec"] = spec
        required.append("spec")
    schema = closed(properties, tuple(required))
    return {
        "$schema": DIALECT,
        "$id": f"https://fenceline.local/schemas/{kind.lower()}",
        "title": f"{api_version} {kind}",
        **schema,
        "$defs": _reachable(defs, _refs(schema)),
    }


def build() -> dict[str, dict[str, Any]]:
    from kubernetes.client import models as k8s

    core = core_defs(
        [
            k8s.V1PodTemplateSpec,
            k8s.V1Service,
            k8s.V1ObjectMeta,
            k8s.V1EnvVarSource,
            k8s.V1EnvVar,
            k8s.V1EnvFromSource,
            k8s.V1VolumeMount,
            k8s.V1ResourceRequirements,
            k8s.V1SecurityContext,
            k8s.V1IngressTLS,
            k8s.V1NetworkPolicyIngressRule,
            k8s.V1NetworkPolicyEgressRule,
            k8s.V1LabelSelector,
        ]
    )
    defs = {**core, **kuberay_defs(), **podmonitor_defs(), **kustomize_defs()}
    secret_props = _trim(k8s.V1Secret.model_json_schema(by_alias=True)["properties"])
    cm_props = _trim(k8s.V1ConfigMap.model_json_schema(by_alias=True)["properties"])
    kustomization = defs["KustomizationBody"]
    return {
        "rayservice-ray-v1.json": resource("ray.io/v1", "RayService", ref("RayServiceSpec"), defs),
        "raycluster-ray-v1.json": resource("ray.io/v1", "RayCluster", ref("RayClusterSpec"), defs),
        "rayjob-ray-v1.json": resource("ray.io/v1", "RayJob", ref("RayJobSpec"), defs),
        "secret-v1.json": resource(
            "v1",
            "Secret",
            None,
            defs,
            data=secret_props["data"],
            stringData=secret_props["stringData"],
            type=STR,
            immutable=BOOL,
        ),
        "configmap-v1.json": resource(
            "v1",
            "ConfigMap",
            None,
            defs,
            data=cm_props["data"],
            binaryData=cm_props["binaryData"],
            immutable=BOOL,
        ),
        "podmonitor-monitoring-v1.json": resource(
            "monitoring.coreos.com/v1", "PodMonitor", ref("PodMonitorSpec"), defs
        ),
        "kustomization-v1beta1.json": _kustomize_file(
            "kustomize.config.k8s.io/v1beta1", "Kustomization", kustomization
        ),
        "component-v1alpha1.json": _kustomize_file(
            "kustomize.config.k8s.io/v1alpha1", "Component", kustomization
        ),
    }


def _kustomize_file(api_version: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": DIALECT,
        "$id": f"https://fenceline.local/schemas/{kind.lower()}",
        "title": f"{api_version} {kind} (the subset kuberay/kustomize.py renders)",
        **closed(
            {"apiVersion": {"const": api_version}, "kind": {"const": kind}, **body},
            ("apiVersion", "kind"),
        ),
    }


def main() -> int:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, schema in build().items():
        text = json.dumps(schema, indent=1, sort_keys=True) + "\n"
        (SCHEMA_DIR / name).write_text(text)
        print(f"{name}: {len(text) // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
