"""The chart installed for real with Helm's own client into the local API server: the objects
exist afterwards (CRD included), an upgrade changes them and keeps what the injector wrote into
its Secret and the webhook's caBundle, the example pools are admitted by the installed CRD
(schema and CEL rules), and an uninstall removes the release's objects."""

import glob
import os
import shutil
import unittest

import chartkit as kit
from test_deploy import load_all


class Install(unittest.TestCase):
    def setUp(self):
        kit.skip_without_binaries("rollcall-devcluster")
        self.cluster = kit.Cluster()
        self.addCleanup(shutil.rmtree, self.cluster.dir, True)
        self.addCleanup(self.cluster.stop)

    def get(self, path):
        return self.cluster.get(path)

    def test_install_upgrade_and_uninstall(self):
        client, release = kit.install(self.cluster)
        self.assertEqual(release["status"], "deployed")
        ns = kit.NAMESPACE
        self.assertIsNotNone(self.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backendpools.rollcall.dev"))
        for path in [f"/apis/apps/v1/namespaces/{ns}/deployments/rollcall-controller",
                     f"/apis/apps/v1/namespaces/{ns}/deployments/rollcall-injector",
                     f"/api/v1/namespaces/{ns}/services/rollcall-controller",
                     f"/api/v1/namespaces/{ns}/services/rollcall-injector",
                     f"/api/v1/namespaces/{ns}/serviceaccounts/rollcall-controller",
                     f"/api/v1/namespaces/{ns}/secrets/rollcall-injector-tls",
                     f"/api/v1/namespaces/{ns}/configmaps/rollcall-injector",
                     f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/rollcall-controller",
                     f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/rollcall-controller",
                     f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/rollcall-controller",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles/rollcall-controller",
                     "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/rollcall-controller",
                     "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector"]:
            with self.subTest(path=path):
                self.assertIsNotNone(self.get(path), path)
        deployment = self.get(f"/apis/apps/v1/namespaces/{ns}/deployments/rollcall-controller")
        self.assertEqual(deployment["spec"]["replicas"], 2)

        # What the injector writes at run time: Helm must leave it alone on upgrade.
        self.cluster.ok("PATCH", f"/api/v1/namespaces/{ns}/secrets/rollcall-injector-tls",
                        {"data": {"tls.crt": kit.b64("CERT")}}, "application/merge-patch+json")
        self.cluster.ok("PATCH", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector",
                        [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": kit.b64("CA")}],
                        "application/json-patch+json")

        upgraded = client.upgrade(kit.CHART, "rollcall", {"controller": {"replicas": 3},
                                                          "networkPolicy": {"enabled": True}})
        self.assertEqual(upgraded["revision"], 2)
        deployment = self.get(f"/apis/apps/v1/namespaces/{ns}/deployments/rollcall-controller")
        self.assertEqual(deployment["spec"]["replicas"], 3)
        self.assertIsNotNone(self.get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/rollcall-controller"))
        secret = self.get(f"/api/v1/namespaces/{ns}/secrets/rollcall-injector-tls")
        self.assertEqual(secret["data"]["tls.crt"], kit.b64("CERT"), "the upgrade wiped the injector's Secret")
        webhook = self.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector")
        self.assertEqual(webhook["webhooks"][0]["clientConfig"]["caBundle"], kit.b64("CA"),
                         "the upgrade wiped the caBundle")

        client.uninstall("rollcall")
        for path in [f"/apis/apps/v1/namespaces/{ns}/deployments/rollcall-controller",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles/rollcall-controller",
                     "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector",
                     f"/api/v1/namespaces/{ns}/secrets/rollcall-injector-tls"]:
            self.assertIsNone(self.get(path), path)
        self.assertEqual(client.list(), [])
        # Helm never deletes CRDs (they would take every BackendPool with them).
        self.assertIsNotNone(self.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backendpools.rollcall.dev"))

    def test_example_pools_are_admitted_by_the_installed_crd(self):
        kit.install(self.cluster)
        self.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
        pools = [d for p in sorted(glob.glob(os.path.join(kit.ROOT, "deploy", "examples", "*.yaml")))
                 for d in load_all(p) if d["kind"] == "BackendPool"]
        for pool in pools:
            with self.subTest(pool=pool["metadata"]["name"]):
                self.cluster.apply(pool)
        code, answer = self.cluster.request(
            "POST", "/apis/rollcall.dev/v1alpha1/namespaces/shop/backendpools",
            {"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool", "metadata": {"name": "bad"},
             "spec": {"service": {"name": "x", "port": 80}, "healthCheck": {"interval": "1s", "timeout": "5s"}}})
        self.assertEqual(code, 422, answer)
        self.assertIn("healthCheck.timeout must be more than 0s and at most healthCheck.interval", str(answer))


if __name__ == "__main__":
    unittest.main()
