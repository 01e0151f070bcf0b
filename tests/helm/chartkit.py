"""Shared by the chart tests: rendering the chart with Helm's own engine, the value sets the
tests render, validation against the Kubernetes schemas, and the local API server with the
real binaries started against it (with ServiceAccount tokens, so RBAC is enforced)."""

import base64
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import helm_python as helm
import kubernetes_validate
import yaml

import test_helm_client as base

ROOT = base.ROOT
CHART = os.path.join(ROOT, "charts", "rollcall")
NAMESPACE = "rollcall-system"
# Two recent Kubernetes versions: the oldest the chart supports (native sidecars) and a current one.
KUBE_VERSIONS = ["1.29.0", "1.35.0"]

# Non-default value sets the tests render, lint and validate.
VARIANTS = {
    "defaults": {},
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "podMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True, "ejectedShareThreshold": 0.5},
            "dashboards": {"enabled": True},
        },
    },
    "locked-down": {
        "networkPolicy": {"enabled": True},
        "controller": {"podAntiAffinity": "hard", "replicas": 3, "logFormat": "text",
                       "lease": {"duration": "30s", "grace": "10s"},
                       "nodeSelector": {"kubernetes.io/os": "linux"},
                       "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
                       "priorityClassName": "system-cluster-critical"},
        "injector": {"failurePolicy": "Fail", "podAntiAffinity": "none"},
        "imagePullSecrets": [{"name": "regcred"}],
        "image": {"registry": "registry.example.com/rollcall", "tag": "0.1.0-rc.1"},
    },
    "cert-manager": {"injector": {"certificates": {"mode": "cert-manager"}},
                     "controller": {"tls": {"secretName": "roster-tls-from-cert-manager"}},
                     "sidecar": {"controllerCA": {"configMap": "rollcall-controller-ca"}}},
    "no-injector": {"injector": {"enabled": False},
                    "controller": {"podDisruptionBudget": {"enabled": False}, "tls": {"plaintext": True}}},
    "roster-tls": {"sidecar": {"controllerCA": {"configMap": "rollcall-controller-ca"}},
                   "controller": {"image": {"digest": "sha256:" + "a" * 64},
                                  "tls": {"secretName": "rollcall-controller-tls"}}},
}

# Kinds kubernetes-validate has no schema for (custom resources of other projects).
FOREIGN_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate", "Issuer"}

binary = base.binary


def render(values=None, namespace=NAMESPACE, name="rollcall"):
    """{template path: [documents]} as Helm's engine renders the chart (CRDs not included)."""
    chart = helm.Chart.load(CHART)
    out = chart.render(values or {}, name=name, namespace=namespace, is_install=True)
    return {path: [d for d in yaml.safe_load_all(text) if d]
            for path, text in out.items() if not path.endswith("NOTES.txt")}


def documents(values=None, namespace=NAMESPACE):
    """Every rendered object, in template order."""
    return [d for docs in render(values, namespace).values() for d in docs]


def crd():
    with open(os.path.join(ROOT, "crds", "backendpool.yaml")) as f:
        return yaml.safe_load(f)


def validate(doc, version):
    """Raise with kubernetes-validate's message when `doc` is not valid for `version`."""
    kubernetes_validate.validate(doc, version, strict=True)


def find(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if not found:
        raise AssertionError(f"no {kind} {name or ''} rendered")
    return found[0] if name else found


def rbac_rules(docs, account):
    """[(rule, namespace or None)] of every Role/ClusterRole bound to ServiceAccount `account`."""
    bound = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        role = find(docs, ref["kind"], ref["name"])
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        bound.extend((rule, scope) for rule in role["rules"])
    return bound


_GIVEN_PORTS = set()


def free_port():
    """A port free on 127.0.0.1 now and never given before by this process: the kernel may hand
    the same free port to two probes in a row, and a test naming two listeners would clash."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port
    raise RuntimeError("no port on 127.0.0.1 this process was not given already")


def http_get(url, timeout=2):
    """(status, body text); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, ""


def wait_for(what, condition, timeout=60, every=0.1, process=None):
    """Wait until condition() is truthy (and return it); fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(every)


class Cluster(base.LocalApi):
    """The local API server, with writes, ServiceAccount tokens and the request log."""

    def request(self, method, path, body=None, content_type="application/json", token=None):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Authorization": f"Bearer {token or self.token}", "Content-Type": content_type,
                   "Accept": "application/json"}
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.tls) as answer:
                text = answer.read()
                return answer.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode()

    def ok(self, method, path, body=None, content_type="application/json"):
        code, answer = self.request(method, path, body, content_type)
        if code >= 300:
            raise AssertionError(f"{method} {path}: {code} {answer}")
        return answer

    def apply(self, doc, manager="tests"):
        """Server-side apply of one object, as kubectl apply --server-side does."""
        group_version = doc["apiVersion"]
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        plural = {"Namespace": "namespaces", "Service": "services", "EndpointSlice": "endpointslices",
                  "BackendPool": "backendpools", "Pod": "pods", "ConfigMap": "configmaps",
                  "ServiceAccount": "serviceaccounts", "Node": "nodes"}[doc["kind"]]
        ns = doc["metadata"].get("namespace")
        path = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
        path += f"/{doc['metadata']['name']}?fieldManager={manager}&force=true"
        return self.ok("PATCH", path, doc, "application/apply-patch+yaml")

    def service_account_token(self, namespace, name, audiences=None, seconds=3600):
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds, **({"audiences": audiences} if audiences else {})}}
        answer = self.ok("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
        return answer["status"]["token"]

    def kubeconfig_for(self, token, path):
        """A kubeconfig for this server that authenticates with `token`."""
        with open(self.kubeconfig) as f:
            config = yaml.safe_load(f)
        for user in config["users"]:
            user["user"] = {"token": token}
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    def requests_log(self):
        with urllib.request.urlopen(self.server + "/_devcluster/requests", context=self.tls) as answer:
            text = answer.read().decode()
        try:
            parsed = json.loads(text)
            return parsed if isinstance(parsed, list) else parsed.get("requests", parsed.get("items", []))
        except ValueError:
            return [json.loads(line) for line in text.splitlines() if line.strip()]


class Processes:
    """Child processes of one test, stopped at clean-up; each logs into the test's directory."""

    def __init__(self, directory):
        self.directory = directory
        self.children = []

    def start(self, name, argv, env=None):
        log = open(os.path.join(self.directory, f"{name}.log"), "w")
        child = subprocess.Popen(argv, stdout=log, stderr=log, env={**os.environ, **(env or {})})
        child.log_path = log.name
        self.children.append(child)
        return child

    def log(self, child):
        with open(child.log_path) as f:
            return f.read()

    def stop(self, child, timeout=15):
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def stop_all(self):
        for child in reversed(self.children):
            self.stop(child)


def skip_without_binaries(*names):
    for name in names:
        binary(name)


def install(cluster, values=None, namespace=NAMESPACE):
    """helm install with Helm's own client into the local API server."""
    client = helm.Config(kubeconfig_path=cluster.kubeconfig, namespace=namespace)
    return client, client.install(CHART, "rollcall", values or {}, create_namespace=True)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def temp_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


SkipTest = unittest.SkipTest
