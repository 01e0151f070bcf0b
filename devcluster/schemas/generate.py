#!/usr/bin/env python3
"""Regenerate kubernetes.json: the OpenAPI schemas of the built-in kinds the local API server
serves, taken from the Kubernetes project's published OpenAPI definitions as packaged by the
`kubernetes-validate` PyPI package (Apache-2.0), trimmed to what those kinds reference and
without descriptions, and turned back from JSON Schema into OpenAPI v3 form (single `type`,
int-or-string as the API server marks it, `#/components/schemas/` references).

    pip install kubernetes-validate==1.37.0 && python3 devcluster/schemas/generate.py
"""
import json
import os
import sys

import kubernetes_validate

VERSION = "v1.35.0"
ROOTS = [
    "io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.Service", "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.Event", "io.k8s.api.core.v1.ServiceAccount", "io.k8s.api.core.v1.Secret",
    "io.k8s.api.core.v1.ConfigMap", "io.k8s.api.core.v1.Endpoints", "io.k8s.api.core.v1.Node",
    "io.k8s.api.discovery.v1.EndpointSlice", "io.k8s.api.events.v1.Event",
    "io.k8s.api.coordination.v1.Lease", "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.apps.v1.ReplicaSet", "io.k8s.api.apps.v1.StatefulSet", "io.k8s.api.apps.v1.DaemonSet",
    "io.k8s.api.rbac.v1.Role", "io.k8s.api.rbac.v1.RoleBinding", "io.k8s.api.rbac.v1.ClusterRole",
    "io.k8s.api.rbac.v1.ClusterRoleBinding", "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.networking.v1.NetworkPolicy",
    "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
    "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "io.k8s.api.authentication.v1.TokenRequest", "io.k8s.api.authentication.v1.TokenReview",
    "io.k8s.api.authorization.v1.SubjectAccessReview",
    "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
]
PREFIX = "#/$defs/"


def convert(node):
    if isinstance(node, list):
        return [convert(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "oneOf" in node and sorted(
        t for alt in node["oneOf"] for t in (alt.get("type") or []) if t != "null"
    ) == ["integer", "string"]:
        return {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}
    out = {}
    for key, value in node.items():
        if key in ("description", "$schema", "$id"):
            continue
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) == 1:
                out["type"] = kinds[0]
            elif kinds:
                out["type"] = kinds
            continue
        if key == "$ref":
            out["$ref"] = "#/components/schemas/" + value[len(PREFIX):]
            continue
        if key == "enum" and isinstance(value, list):
            value = [v for v in value if v is not None]
        if key == "properties":
            out[key] = {k: convert(v) for k, v in value.items()}
            continue
        out[key] = convert(value)
    return out


def refs(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(PREFIX):
            found.add(ref[len(PREFIX):])
        for value in node.values():
            refs(value, found)
    elif isinstance(node, list):
        for value in node:
            refs(value, found)


def main():
    base = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")
    with open(os.path.join(base, VERSION + "-local", "_definitions.json")) as f:
        defs = json.load(f)["$defs"]
    keep, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        if name not in defs:
            sys.exit(f"{name} is not in the {VERSION} definitions")
        keep.add(name)
        found = set()
        refs(defs[name], found)
        todo.extend(found - keep)
    out = {"kubernetesVersion": VERSION, "schemas": {n: convert(defs[n]) for n in sorted(keep)}}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kubernetes.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print(f"{path}: {len(keep)} schemas")


if __name__ == "__main__":
    main()
