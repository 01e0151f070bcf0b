"""Helm's own client (Helm 4, through helm-python-sdk: no helm binary) against the local API
server: install a chart with its namespace created by Helm, upgrade it, list it, uninstall it,
with release Secrets as the storage (Helm's default) -- the path the chart tests rely on.

Run: .venv/bin/python -m unittest discover -s tests/helm (after cargo build --bins)."""

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import helm_python as helm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny")


def binary(name):
    for profile in ("debug", "release"):
        path = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), profile, name)
        if os.path.exists(path):
            return path
    raise unittest.SkipTest(f"{name} is not built (cargo build --bins)")


class LocalApi:
    """rollcall-devcluster as a child process, and plain HTTPS reads against it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rollcall-helm-")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        log = open(os.path.join(self.dir, "devcluster.log"), "w")
        self.process = subprocess.Popen(
            [binary("rollcall-devcluster"), "--listen", "127.0.0.1:0", "--kubeconfig-out", self.kubeconfig],
            stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.kubeconfig):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("rollcall-devcluster wrote no kubeconfig")
            time.sleep(0.02)
        text = open(self.kubeconfig).read()
        field = lambda key: next(l.split(": ", 1)[1] for l in text.splitlines() if l.strip().startswith(key + ":"))
        self.server = field("server")
        self.token = field("token")
        ca = base64.b64decode(field("certificate-authority-data")).decode()
        self.tls = ssl.create_default_context(cadata=ca)

    def get(self, path):
        request = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, context=self.tls) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


class HelmClient(unittest.TestCase):
    def setUp(self):
        self.api = LocalApi()
        self.addCleanup(self.api.stop)
        self.helm = helm.Config(kubeconfig_path=self.api.kubeconfig, namespace="tiny-ns")

    def test_install_upgrade_list_and_uninstall(self):
        installed = self.helm.install(CHART, "tiny", {}, create_namespace=True)
        self.assertEqual(installed["status"], "deployed")
        self.assertIsNotNone(self.api.get("/api/v1/namespaces/tiny-ns"))
        config = self.api.get("/api/v1/namespaces/tiny-ns/configmaps/tiny-config")
        self.assertEqual(config["data"]["answer"], "42")
        deployment = self.api.get("/apis/apps/v1/namespaces/tiny-ns/deployments/tiny-app")
        self.assertEqual(deployment["spec"]["template"]["spec"]["containers"][0]["name"], "app")
        secrets = self.api.get("/api/v1/namespaces/tiny-ns/secrets?labelSelector=owner%3Dhelm")
        self.assertEqual([s["metadata"]["name"] for s in secrets["items"]], ["sh.helm.release.v1.tiny.v1"])

        upgraded = self.helm.upgrade(CHART, "tiny", {"answer": "43"})
        self.assertEqual(upgraded["revision"], 2)
        config = self.api.get("/api/v1/namespaces/tiny-ns/configmaps/tiny-config")
        self.assertEqual(config["data"]["answer"], "43")
        self.assertEqual([r["name"] for r in self.helm.list()], ["tiny"])

        self.helm.uninstall("tiny")
        self.assertIsNone(self.api.get("/api/v1/namespaces/tiny-ns/configmaps/tiny-config"))
        self.assertIsNone(self.api.get("/apis/apps/v1/namespaces/tiny-ns/deployments/tiny-app"))
        self.assertEqual(self.helm.list(), [])


if __name__ == "__main__":
    unittest.main()
