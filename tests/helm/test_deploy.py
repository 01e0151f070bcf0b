"""deploy/: the plain manifests and the manual sidecar example are what the chart and the
injector generate (manifests.py), every built-in object in them and in the examples is valid
for two Kubernetes versions, injected pods are valid Pods, and the example BackendPools fit
the CRD's schema."""

import glob
import os
import unittest

import jsonschema
import yaml

import chartkit as kit
import manifests


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def structural(node):
    """The CRD's openAPIV3Schema as plain JSON Schema: `nullable` becomes a null alternative,
    Kubernetes' extensions are dropped."""
    if isinstance(node, list):
        return [structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: structural(v) for k, v in node.items()
           if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("x-kubernetes-int-or-string"):
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable"):
        return {"anyOf": [{"type": "null"}, out]}
    return out


class Generated(unittest.TestCase):
    def test_plain_manifests_are_the_rendered_chart(self):
        with open(manifests.PLAIN) as f:
            self.assertEqual(f.read(), manifests.plain_manifests(),
                             "regenerate with .venv/bin/python tests/helm/manifests.py")

    def test_manual_sidecar_is_what_the_injector_adds(self):
        with open(manifests.MANUAL) as f:
            self.assertEqual(f.read(), manifests.manual_sidecar(),
                             "regenerate with .venv/bin/python tests/helm/manifests.py")

    def test_plain_manifests_carry_no_helm_labels(self):
        with open(manifests.PLAIN) as f:
            text = f.read()
        self.assertNotIn("helm.sh/chart", text)
        self.assertNotIn("managed-by: Helm", text)


class Valid(unittest.TestCase):
    def builtins(self):
        paths = [manifests.PLAIN] + sorted(glob.glob(os.path.join(kit.ROOT, "deploy", "examples", "*.yaml")))
        for path in paths:
            for doc in load_all(path):
                if doc["kind"] not in ("BackendPool", "CustomResourceDefinition"):
                    yield os.path.relpath(path, kit.ROOT), doc

    def test_built_in_objects_validate(self):
        for version in kit.KUBE_VERSIONS:
            for path, doc in self.builtins():
                with self.subTest(file=path, object=f"{doc['kind']}/{doc['metadata']['name']}", kube=version):
                    kit.validate(doc, version)

    def test_injected_pods_validate(self):
        cases = [os.path.basename(p)[: -len(".expected.json")]
                 for p in glob.glob(os.path.join(manifests.GOLDEN, "*.expected.json"))]
        injected = []
        for case in cases:
            with open(os.path.join(manifests.GOLDEN, f"{case}.expected.json")) as f:
                if '"decision": "inject"' in f.read():
                    injected.append(case)
        self.assertGreaterEqual(len(injected), 3)
        for version in kit.KUBE_VERSIONS:
            for case in injected:
                with self.subTest(case=case, kube=version):
                    pod = manifests.injected(case)
                    kit.validate(pod, version)
                    self.assertEqual(pod["spec"]["initContainers"][0]["restartPolicy"], "Always")

    def test_example_pools_fit_the_crd_schema(self):
        schema = structural(kit.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        pools = [(p, d) for p in sorted(glob.glob(os.path.join(kit.ROOT, "deploy", "examples", "*.yaml")))
                 for d in load_all(p) if d["kind"] == "BackendPool"]
        self.assertGreaterEqual(len(pools), 4)
        for path, pool in pools:
            with self.subTest(file=os.path.relpath(path, kit.ROOT), pool=pool["metadata"]["name"]):
                jsonschema.validate(pool, schema)
        bad = {"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "x"},
               "spec": {"service": {"name": "x", "port": 80}, "healthCheck": {"type": "gRPC"}}}
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


if __name__ == "__main__":
    unittest.main()
